// reservoir/reservoir.hpp - everything: the platform layer, Arena, ArenaResource, DynArray<T>.
#pragma once

#include <reservoir/arena.hpp>
#include <reservoir/arena_resource.hpp>
#include <reservoir/dynarray.hpp>
#include <reservoir/pal.hpp>
#include <reservoir/version.hpp>
