"""What CMake needs to build collx_torch against this interpreter's torch: one line of
';'-separated fields (torch/CMakeLists.txt reads them in this order)."""
import os
import sysconfig

import torch
import torch.utils.cpp_extension as ext

include_dirs = ext.include_paths()
# torch 2.x ships the pybind11 it was built with (torch/include/pybind11): the module must use
# that one, not another version installed beside it.
bundled = [d for d in include_dirs if os.path.isfile(os.path.join(d, "pybind11", "pybind11.h"))]
pybind11_include = bundled[0] if bundled else ""
library_dirs = ext.library_paths()
print(";".join([
    torch.__version__,
    sysconfig.get_paths()["include"],
    pybind11_include,
    sysconfig.get_config_var("EXT_SUFFIX"),
    str(int(torch._C._GLIBCXX_USE_CXX11_ABI)),
    torch.version.cuda or "",            # the CUDA toolkit this torch was built with, or none
    library_dirs[0] if library_dirs else "",
] + include_dirs[:2]))
