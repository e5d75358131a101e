// reservoir/reservoir.hpp - everything: Arena, ArenaResource, DynArray<T>, ConcurrentDynArray<T>.
#pragma once

#include <reservoir/arena.hpp>
#include <reservoir/arena_resource.hpp>
#include <reservoir/concurrent_dynarray.hpp>
#include <reservoir/dynarray.hpp>
#include <reservoir/version.hpp>
