// What libcollx_mpi needs to know of an MPI datatype (TypeLayout), read from the datatype's
// envelope and contents once and cached on the datatype, and which reductions collx computes.
#include <climits>
#include <cstdint>
#include <unordered_map>
#include <vector>

#include "interpose.hpp"

namespace collx_mpi {

namespace {

// A predefined MPI integer type of `bytes` bytes, signed or not, as collx's type.
std::optional<collx::DataType> integer_type(std::size_t bytes, bool is_signed) {
  switch (bytes) {
    case 1:
      return is_signed ? collx::DataType::int8 : collx::DataType::uint8;
    case 4:
      return is_signed ? collx::DataType::int32 : collx::DataType::uint32;
    case 8:
      return is_signed ? collx::DataType::int64 : collx::DataType::uint64;
    default:
      return std::nullopt;  // short, 16-bit: collx has no 16-bit integers
  }
}

// The collx type of a predefined (named) MPI type collx reduces, or nothing.
std::optional<collx::DataType> collx_type(MPI_Datatype t) {
  if (t == MPI_DATATYPE_NULL) return std::nullopt;  // before the Fortran types a build may lack
  // Handles are compared one by one: in Open MPI they are addresses, in MPICH integers.
  if (t == MPI_FLOAT || t == MPI_REAL || t == MPI_REAL4) return collx::DataType::float32;
  if (t == MPI_DOUBLE || t == MPI_DOUBLE_PRECISION || t == MPI_REAL8)
    return collx::DataType::float64;
  if (t == MPI_INT8_T || t == MPI_SIGNED_CHAR || t == MPI_INTEGER1) return collx::DataType::int8;
  if (t == MPI_UINT8_T || t == MPI_UNSIGNED_CHAR) return collx::DataType::uint8;
  if (t == MPI_INT32_T || t == MPI_INTEGER4) return collx::DataType::int32;
  if (t == MPI_UINT32_T) return collx::DataType::uint32;
  if (t == MPI_INT64_T || t == MPI_INTEGER8) return collx::DataType::int64;
  if (t == MPI_UINT64_T) return collx::DataType::uint64;
  if (t == MPI_INT) return integer_type(sizeof(int), true);
  if (t == MPI_UNSIGNED) return integer_type(sizeof(unsigned), false);
  if (t == MPI_LONG) return integer_type(sizeof(long), true);
  if (t == MPI_UNSIGNED_LONG) return integer_type(sizeof(unsigned long), false);
  if (t == MPI_LONG_LONG || t == MPI_LONG_LONG_INT) return integer_type(sizeof(long long), true);
  if (t == MPI_UNSIGNED_LONG_LONG) return integer_type(sizeof(unsigned long long), false);
  if (t == MPI_INTEGER) {
    int bytes = 0;
    PMPI_Type_size(t, &bytes);
    return integer_type(static_cast<std::size_t>(bytes), true);
  }
  return std::nullopt;
}

std::optional<collx::ReduceOp> collx_op(MPI_Op op) {
  if (op == MPI_SUM) return collx::ReduceOp::sum;
  if (op == MPI_PROD) return collx::ReduceOp::prod;
  if (op == MPI_MIN) return collx::ReduceOp::min;
  if (op == MPI_MAX) return collx::ReduceOp::max;
  return std::nullopt;
}

// The basic elements a datatype is made of, for reductions: none yet (no element seen), one
// collx type throughout, or a mix (or an element collx does not reduce).
struct Elements {
  enum class Kind { none, one, mixed } kind = Kind::none;
  collx::DataType type = collx::DataType::uint8;

  void add(const Elements& other) {
    if (other.kind == Kind::none || kind == Kind::mixed) return;
    if (other.kind == Kind::mixed || (kind == Kind::one && other.type != type)) {
      kind = Kind::mixed;
      return;
    }
    *this = other;
  }
};

// Where a datatype's bytes lie, in typemap order: one run [offset, offset + length) with no gap
// and nothing out of order, or not (`run` false). An empty typemap is a run of length 0.
struct Run {
  bool run = true;
  bool empty = true;
  MPI_Aint offset = 0;
  MPI_Aint length = 0;

  // Appends `blocks` elements of a child whose bytes are the run `child` with extent `extent`,
  // the first at `displacement` from the parent's origin.
  void add(MPI_Aint displacement, MPI_Aint blocks, const Run& child, MPI_Aint extent) {
    if (!run || blocks <= 0 || child.empty || child.length == 0) return;
    if (!child.run || (blocks > 1 && extent != child.length)) {
      run = false;
      return;
    }
    const MPI_Aint start = displacement + child.offset;
    if (empty) {
      empty = false;
      offset = start;
    } else if (start != offset + length) {
      run = false;
      return;
    }
    length += blocks * child.length;
  }
};

struct Described {
  Run run;
  Elements elements;
  MPI_Aint extent = 0;
};

Described describe(MPI_Datatype type);

// The datatypes MPI_Type_get_contents returned: freed after use, but for predefined ones.
class ContentTypes {
 public:
  explicit ContentTypes(std::size_t count) : types_(count) {}
  ~ContentTypes() {
    for (MPI_Datatype& type : types_) {
      int integers = 0, addresses = 0, types = 0, combiner = 0;
      PMPI_Type_get_envelope(type, &integers, &addresses, &types, &combiner);
      if (combiner != MPI_COMBINER_NAMED) PMPI_Type_free(&type);
    }
  }
  ContentTypes(const ContentTypes&) = delete;
  ContentTypes& operator=(const ContentTypes&) = delete;
  MPI_Datatype* data() { return types_.data(); }
  std::size_t size() const { return types_.size(); }
  MPI_Datatype operator[](std::size_t i) const { return types_[i]; }

 private:
  std::vector<MPI_Datatype> types_;
};

MPI_Aint extent_of(MPI_Datatype type) {
  MPI_Aint lb = 0, extent = 0;
  PMPI_Type_get_extent(type, &lb, &extent);
  return extent;
}

Described describe_named(MPI_Datatype type) {
  Described d;
  int size = 0;
  MPI_Aint lb = 0, extent = 0, true_lb = 0, true_extent = 0;
  PMPI_Type_size(type, &size);
  PMPI_Type_get_extent(type, &lb, &extent);
  PMPI_Type_get_true_extent(type, &true_lb, &true_extent);
  d.extent = extent;
  // A predefined type's elements are in memory order; a pair type (MPI_SHORT_INT) may have a
  // hole between its two members, which its true extent shows.
  d.run.empty = size == 0;
  d.run.run = size == 0 || true_extent == size;
  d.run.offset = true_lb;
  d.run.length = size;
  if (size > 0) {
    if (const auto t = collx_type(type)) {
      d.elements.kind = Elements::Kind::one;
      d.elements.type = *t;
    } else {
      d.elements.kind = Elements::Kind::mixed;
    }
  }
  return d;
}

Described describe_derived(MPI_Datatype type, int integers, int addresses, int types,
                           int combiner) {
  std::vector<int> ints(static_cast<std::size_t>(integers));
  std::vector<MPI_Aint> addrs(static_cast<std::size_t>(addresses));
  ContentTypes children(static_cast<std::size_t>(types));
  PMPI_Type_get_contents(type, integers, addresses, types, ints.data(), addrs.data(),
                         children.data());
  Described d;
  d.extent = extent_of(type);
  if (children.size() == 0) {
    d.run.run = false;
    d.elements.kind = Elements::Kind::mixed;
    return d;
  }
  const Described child = describe(children[0]);
  const MPI_Aint e = child.extent;
  auto blocks_at = [&](MPI_Aint displacement, MPI_Aint blocks, const Described& c) {
    if (blocks <= 0) return;
    d.run.add(displacement, blocks, c.run, c.extent);
    d.elements.add(c.elements);
  };
  switch (combiner) {
    case MPI_COMBINER_DUP:
    case MPI_COMBINER_RESIZED:  // the same bytes; only the extent differs
      d.run = child.run;
      d.elements = child.elements;
      break;
    case MPI_COMBINER_CONTIGUOUS:
      blocks_at(0, ints[0], child);
      break;
    case MPI_COMBINER_VECTOR:
      for (int i = 0; i < ints[0] && d.run.run; ++i)
        blocks_at(static_cast<MPI_Aint>(i) * ints[2] * e, ints[1], child);
      break;
    case MPI_COMBINER_HVECTOR:
      for (int i = 0; i < ints[0] && d.run.run; ++i)
        blocks_at(static_cast<MPI_Aint>(i) * addrs[0], ints[1], child);
      break;
    case MPI_COMBINER_INDEXED:
      for (int i = 0; i < ints[0]; ++i)
        blocks_at(static_cast<MPI_Aint>(ints[1 + ints[0] + i]) * e, ints[1 + i], child);
      break;
    case MPI_COMBINER_HINDEXED:
      for (int i = 0; i < ints[0]; ++i)
        blocks_at(addrs[static_cast<std::size_t>(i)], ints[1 + i], child);
      break;
    case MPI_COMBINER_INDEXED_BLOCK:
      for (int i = 0; i < ints[0]; ++i)
        blocks_at(static_cast<MPI_Aint>(ints[2 + i]) * e, ints[1], child);
      break;
    case MPI_COMBINER_HINDEXED_BLOCK:
      for (int i = 0; i < ints[0]; ++i)
        blocks_at(addrs[static_cast<std::size_t>(i)], ints[1], child);
      break;
    case MPI_COMBINER_STRUCT:
      for (int i = 0; i < ints[0]; ++i) {
        const auto k = static_cast<std::size_t>(i);
        blocks_at(addrs[k], ints[1 + i], i == 0 ? child : describe(children[k]));
      }
      break;
    default:
      // Subarrays, distributed arrays, Fortran's parameterised types: packed by MPI, and
      // their elements taken from what they are made of.
      d.run.run = false;
      for (std::size_t k = 0; k < children.size(); ++k)
        d.elements.add(describe(children[k]).elements);
      break;
  }
  return d;
}

Described describe(MPI_Datatype type) {
  int integers = 0, addresses = 0, types = 0, combiner = 0;
  PMPI_Type_get_envelope(type, &integers, &addresses, &types, &combiner);
  if (combiner == MPI_COMBINER_NAMED) return describe_named(type);
  if (combiner == MPI_COMBINER_F90_REAL || combiner == MPI_COMBINER_F90_COMPLEX ||
      combiner == MPI_COMBINER_F90_INTEGER) {
    Described d = describe_named(type);  // a predefined type in all but name
    d.elements.kind = Elements::Kind::mixed;
    return d;
  }
  return describe_derived(type, integers, addresses, types, combiner);
}

TypeLayout layout_from(MPI_Datatype type) {
  const Described d = describe(type);
  TypeLayout layout;
  int size = 0;
  PMPI_Type_size(type, &size);
  layout.size = static_cast<std::size_t>(size);
  layout.extent = d.extent;
  layout.run = d.run.run;
  layout.offset = d.run.empty ? 0 : d.run.offset;
  if (d.elements.kind == Elements::Kind::one) {
    const std::size_t element = collx::size_of(d.elements.type);
    if (layout.size % element == 0) {
      layout.element = d.elements.type;
      layout.elements = layout.size / element;
    }
  }
  return layout;
}

// The layouts of predefined types, by handle (they live as long as MPI), and of derived ones
// in an attribute of the datatype, so a freed and reused handle never finds a stale layout.
std::unordered_map<MPI_Datatype, TypeLayout> named_layouts;
int type_keyval = MPI_KEYVAL_INVALID;
// The predefined type asked about last (a program's run of calls with one datatype finds it
// without hashing); a map's elements stay where they are.
MPI_Datatype last_named = MPI_DATATYPE_NULL;
const TypeLayout* last_named_layout = nullptr;

int delete_layout(MPI_Datatype, int, void* value, void*) {
  delete static_cast<TypeLayout*>(value);
  return MPI_SUCCESS;
}

}  // namespace

const TypeLayout* layout_of(MPI_Datatype type) {
  if (type == MPI_DATATYPE_NULL) return nullptr;
  if (type == last_named) return last_named_layout;
  if (const auto found = named_layouts.find(type); found != named_layouts.end()) {
    last_named = type;
    last_named_layout = &found->second;
    return last_named_layout;
  }
  int integers = 0, addresses = 0, types = 0, combiner = 0;
  if (PMPI_Type_get_envelope(type, &integers, &addresses, &types, &combiner) != MPI_SUCCESS)
    return nullptr;
  if (combiner == MPI_COMBINER_NAMED) {
    TypeLayout layout = layout_from(type);
    layout.predefined = true;
    return &named_layouts.emplace(type, layout).first->second;
  }
  if (type_keyval == MPI_KEYVAL_INVALID)
    PMPI_Type_create_keyval(MPI_TYPE_NULL_COPY_FN, delete_layout, &type_keyval, nullptr);
  void* value = nullptr;
  int found = 0;
  PMPI_Type_get_attr(type, type_keyval, &value, &found);
  if (found) return static_cast<const TypeLayout*>(value);
  auto* layout = new TypeLayout(layout_from(type));
  PMPI_Type_set_attr(type, type_keyval, layout);
  return layout;
}

void release_type_layouts() {
  if (type_keyval != MPI_KEYVAL_INVALID) PMPI_Type_free_keyval(&type_keyval);
  named_layouts.clear();
  last_named = MPI_DATATYPE_NULL;
  last_named_layout = nullptr;
}

std::optional<Reduction> reduction_of(const TypeLayout& layout, MPI_Op op) {
  const auto o = collx_op(op);
  if (!o || !layout.element) return std::nullopt;
  return Reduction{*layout.element, *o, layout.elements};
}

}  // namespace collx_mpi
