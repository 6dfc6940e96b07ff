// How a torch ReduceOp on a tensor runs (process_group.hpp, Reduction): reduced by collx in its
// own type, or folded by torch in rank order, or refused.
#include "process_group.hpp"

#include <ATen/ops/maximum.h>
#include <ATen/ops/minimum.h>

#include "checks.hpp"
#include "dtypes.hpp"

namespace collx_torch {
using namespace detail;
namespace {

const char* torch_op_name(c10d::ReduceOp::RedOpType op) {
  switch (op) {
    case c10d::ReduceOp::SUM:
      return "SUM";
    case c10d::ReduceOp::AVG:
      return "AVG";
    case c10d::ReduceOp::PRODUCT:
      return "PRODUCT";
    case c10d::ReduceOp::MIN:
      return "MIN";
    case c10d::ReduceOp::MAX:
      return "MAX";
    case c10d::ReduceOp::BAND:
      return "BAND";
    case c10d::ReduceOp::BOR:
      return "BOR";
    case c10d::ReduceOp::BXOR:
      return "BXOR";
    case c10d::ReduceOp::PREMUL_SUM:
      return "PREMUL_SUM";
    default:
      return "UNUSED";
  }
}

}  // namespace

// How one reduction runs (process_group.hpp, Reduction).
Reduction Reduction::of(const c10d::ReduceOp& op, const at::Tensor& t, const char* name) {
  using R = c10d::ReduceOp;
  const at::ScalarType s = t.scalar_type();
  const bool boolean = s == at::kBool;
  const bool complex = at::isComplexType(s);
  const bool floating = at::isFloatingType(s) && !at::isFloat8Type(s);
  const bool integral = at::isIntegralType(s, /*includeBool=*/false);
  auto refuse_pair = [&](const char* why) {
    refuse(name, "ReduceOp.", torch_op_name(op.op_), " on ", s, " tensors is not supported (", why,
           ")");
  };
  if (!boolean && !complex && !floating && !integral) {
    refuse_pair(
        "collx moves tensors of every dtype, but reduces only integer, bool, floating "
        "and complex ones");
  }
  Reduction r;
  auto native = [&](collx::DataType type, collx::ReduceOp rop, int64_t units = 1) {
    r.fold = false;
    r.type = type;
    r.op = rop;
    r.units = units;
  };
  auto folded = [&] { r.fold = true; };
  const Moved moved = moved_as(s);
  const bool has_native = moved.per_element == 1;
  switch (op.op_) {
    case R::PREMUL_SUM: {
      if (!floating && !complex) refuse_pair("PREMUL_SUM scales by a floating-point factor");
      auto* factor = dynamic_cast<c10d::PreMulSumSupplement*>(op.supplement_.get());
      if (!factor) refuse(name, "ReduceOp.PREMUL_SUM without its factor");
      if (factor->tensor_factor.defined()) {
        r.premul_tensor = factor->tensor_factor;
      } else {
        r.premul = factor->double_factor;
      }
      [[fallthrough]];
    }
    case R::SUM:
      if (boolean) {
        native(collx::DataType::uint8, collx::ReduceOp::max);  // torch's bool SUM: any
      } else if (complex) {
        native(s == at::kComplexDouble ? collx::DataType::float64 : collx::DataType::float32,
               collx::ReduceOp::sum, 2);
      } else if (has_native) {
        native(moved.type, collx::ReduceOp::sum);
      } else {
        folded();
      }
      break;
    case R::AVG:
      if (!floating && !complex)
        refuse_pair("collx averages floating-point and complex tensors only");
      if (complex) {
        native(s == at::kComplexDouble ? collx::DataType::float64 : collx::DataType::float32,
               collx::ReduceOp::avg, 2);
      } else {
        native(moved.type, collx::ReduceOp::avg);
      }
      break;
    case R::PRODUCT:
    case R::MIN:
    case R::MAX: {
      if (complex && op.op_ != R::PRODUCT) refuse_pair("complex numbers have no order");
      const collx::ReduceOp rop = op.op_ == R::PRODUCT ? collx::ReduceOp::prod
                                  : op.op_ == R::MIN   ? collx::ReduceOp::min
                                                       : collx::ReduceOp::max;
      if (boolean) {
        native(collx::DataType::uint8,
               op.op_ == R::MAX ? collx::ReduceOp::max : collx::ReduceOp::min);  // any / all
      } else if (has_native && !complex) {
        native(moved.type, rop);
      } else {
        folded();
      }
      break;
    }
    case R::BAND:
    case R::BOR:
    case R::BXOR:
      if (!integral && !boolean) refuse_pair("bitwise operations take integer and bool tensors");
      if (boolean && op.op_ != R::BXOR) {
        native(collx::DataType::uint8,
               op.op_ == R::BOR ? collx::ReduceOp::max : collx::ReduceOp::min);
      } else {
        folded();
      }
      break;
    default:
      refuse(name, "ReduceOp.", torch_op_name(op.op_), " is not supported");
  }
  r.torch_op = op.op_;
  return r;
}

void Reduction::prescale(at::Tensor& t) const {
  if (premul_tensor.defined()) {
    t.mul_(premul_tensor.to(t.device()));
  } else if (premul) {
    t.mul_(*premul);
  }
}

at::Tensor Reduction::fold_rows(const at::Tensor& rows) const {
  using R = c10d::ReduceOp;
  const at::ScalarType s = rows.scalar_type();
  // Sums, products and bitwise operations on a same-width signed view: torch lacks some of them
  // on unsigned types (uint16-64), and two's complement gives the same bits.
  at::Tensor in = rows;
  if (torch_op != R::MIN && torch_op != R::MAX) {
    switch (s) {
      case at::kUInt16:
        in = rows.view(at::kShort);
        break;
      case at::kUInt32:
        in = rows.view(at::kInt);
        break;
      case at::kUInt64:
        in = rows.view(at::kLong);
        break;
      default:
        break;
    }
  }
  at::Tensor acc = in[0].clone();
  for (int64_t j = 1; j < in.size(0); ++j) {
    const at::Tensor row = in[j];
    switch (torch_op) {
      case R::SUM:
        acc.add_(row);
        break;
      case R::PRODUCT:
        acc.mul_(row);
        break;
      case R::MIN:
        at::minimum_out(acc, acc, row);
        break;
      case R::MAX:
        at::maximum_out(acc, acc, row);
        break;
      case R::BAND:
        acc.bitwise_and_(row);
        break;
      case R::BOR:
        acc.bitwise_or_(row);
        break;
      case R::BXOR:
        acc.bitwise_xor_(row);
        break;
      default:
        break;  // Reduction::of folds no other operation
    }
  }
  return acc.view(s);
}

}  // namespace collx_torch
