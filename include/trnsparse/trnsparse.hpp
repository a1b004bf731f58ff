/// @file trnsparse.hpp
/// The umbrella header: everything public.
#pragma once

#include "trnsparse/advisor.hpp"
#include "trnsparse/attention.hpp"
#include "trnsparse/bf16.hpp"
#include "trnsparse/bsr.hpp"
#include "trnsparse/convert.hpp"
#include "trnsparse/coo.hpp"
#include "trnsparse/csr.hpp"
#include "trnsparse/dense.hpp"
#include "trnsparse/error.hpp"
#include "trnsparse/generators.hpp"
#include "trnsparse/io.hpp"
#include "trnsparse/linear.hpp"
#include "trnsparse/ops.hpp"
#include "trnsparse/plan.hpp"
#include "trnsparse/runtime.hpp"
#include "trnsparse/screening.hpp"
#include "trnsparse/solvers.hpp"
#include "trnsparse/spgemm.hpp"
#include "trnsparse/types.hpp"
#include "trnsparse/version.hpp"
