// Fixture for unit.layers_refuses: a schedule builder must not include the executor.
#pragma once
#include "exec/runner.hpp"
