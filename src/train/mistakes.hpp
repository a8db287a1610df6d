// The test images a network reads wrong: what `evaluate --report` draws in errors.png and what the
// page's runs view shows in its gallery (serve's /api/runs/NAME/evaluation), from one function.
#pragma once

#include <vector>

#include "data/mnist.hpp"
#include "engine/engine.hpp"
#include "pictures/evaluation_pictures.hpp"

namespace lenet5 {

// Every image of `test` whose most probable digit (Engine::probabilities) is not its label, with
// that probability and its index in `test`, ordered by the network's confidence in its wrong
// answer, most confident first, ties by test index: a digit misread at 99 % says more about what
// the network learned than one it hesitated over, so those lead wherever only some are shown.
std::vector<pictures::Mistake> find_mistakes(Engine& engine, const Dataset& test);

}  // namespace lenet5
