// reservoir/reservoir.hpp - everything: the platform layer, Arena and DynArray<T>.
#pragma once

#include <reservoir/arena.hpp>
#include <reservoir/dynarray.hpp>
#include <reservoir/pal.hpp>
#include <reservoir/version.hpp>
