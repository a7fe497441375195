// Fixture for unit.layers_refuses: an allowed include (exec may use sched).
#pragma once
#include "sched/bad.hpp"
