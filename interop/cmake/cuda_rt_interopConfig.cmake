# cuda_rt_interopConfig.cmake: cuda-rt's C ABI for CMake projects.
#
#   project(app LANGUAGES CXX CUDA)
#   set(CMAKE_CUDA_RUNTIME_LIBRARY None)   # the one CUDA runtime comes with cuda_rt::interop
#   find_package(cuda_rt_interop CONFIG REQUIRED PATHS /path/to/cuda-rt/interop/cmake)
#   target_link_libraries(app PRIVATE cuda_rt::interop)
#
# Defines the imported static library cuda_rt::interop: libcuda_rt_interop.a, which cargo
# builds from this checkout (a target of the build, run on every build: cargo itself decides
# whether anything changed), with include/cuda_rt.h on its include path and what the library
# needs at link time. docs/cpp.md at the repository root explains the choices below.
#
# Cache variables (each may be set on the command line):
#   CUDA_RT_INTEROP_RUNTIME      static (default): the library contains the CUDA runtime
#                                (libcudart_static.a), and the program links no other;
#                                shared: the library calls libcudart.so, which is linked here.
#   CUDA_RT_INTEROP_PROFILE      release (default) or debug: cargo's profile.
#   CUDA_RT_INTEROP_CARGO        the cargo executable (found on PATH or in ~/.cargo/bin).
#   CUDA_RT_INTEROP_CARGO_TARGET_DIR
#                                cargo's target folder (default: an exported absolute
#                                CARGO_TARGET_DIR, else cuda-rt-cargo/ in the build folder;
#                                point it at an existing one to reuse its builds).
#   CUDA_RT_INTEROP_CUDA_PATH    the toolkit cargo builds with (CUDA_PATH for cuda-rt-sys);
#                                default: the toolkit of CMAKE_CUDA_COMPILER, so that both sides
#                                agree. Empty: cargo's own search (CUDA_PATH of the environment,
#                                /usr/local/cuda, the checkout's .cuda-toolkit/).
#   CUDA_RT_INTEROP_ARCHS        CUDA_RT_ARCHS for the Rust kernels. auto (default): derived
#                                at every configure from CMAKE_CUDA_ARCHITECTURES as set when
#                                find_package runs: 90 -> 90, 90-real -> sm_90, 90-virtual ->
#                                compute_90; all, all-major, native -> cuda-rt's default. Set
#                                CMAKE_CUDA_ARCHITECTURES before find_package. Empty: cargo's
#                                own choice (CUDA_RT_ARCHS of the environment, else the default).
#   CUDA_RT_INTEROP_CARGO_FLAGS  further arguments of the cargo build, a CMake list (default
#                                none), e.g. --features=... so that the build shares the feature
#                                set, and with it the compiled kernels, of other builds in the same
#                                target folder.
#
# Relocatable device code: by default the library has none (cuda-rt-sort without its feature
# device-driven). Built with it (CUDA_RT_INTEROP_CARGO_FLAGS), the library's relocatable device
# code is device-linked already, with a private copy of the device runtime, inside one object
# whose symbols are local, and must stay out of the consumer's device link (nvlink would link it
# a second time, together with a second device runtime, and the registration code of the two
# collides). The imported target says so with CUDA_RESOLVE_DEVICE_SYMBOLS ON ("already
# device-linked"), which makes CMake leave it out of the device link of any target that links
# it, also with CUDA_SEPARABLE_COMPILATION ON; it takes part in the host link only.

cmake_minimum_required(VERSION 3.18)

if(TARGET cuda_rt::interop)
  return()
endif()

if(NOT CMAKE_CUDA_COMPILER_LOADED)
  message(FATAL_ERROR
    "cuda_rt_interop: enable the CUDA language first (project(... LANGUAGES CXX CUDA) or "
    "enable_language(CUDA)): the library's kernels and yours must come from one toolkit")
endif()

get_filename_component(_cuda_rt_checkout "${CMAKE_CURRENT_LIST_DIR}/../.." ABSOLUTE)

set(CUDA_RT_INTEROP_RUNTIME "static" CACHE STRING
  "CUDA runtime of libcuda_rt_interop.a: static (inside the library) or shared (libcudart.so)")
set_property(CACHE CUDA_RT_INTEROP_RUNTIME PROPERTY STRINGS static shared)
set(CUDA_RT_INTEROP_PROFILE "release" CACHE STRING "cargo profile: release or debug")
set_property(CACHE CUDA_RT_INTEROP_PROFILE PROPERTY STRINGS release debug)
# An exported CARGO_TARGET_DIR (absolute) is the default: the builds there are reused.
if(IS_ABSOLUTE "$ENV{CARGO_TARGET_DIR}")
  set(_cuda_rt_target_default "$ENV{CARGO_TARGET_DIR}")
else()
  if(NOT "$ENV{CARGO_TARGET_DIR}" STREQUAL "")
    message(STATUS "cuda_rt_interop: CARGO_TARGET_DIR=$ENV{CARGO_TARGET_DIR} is relative; "
      "set CUDA_RT_INTEROP_CARGO_TARGET_DIR to use it")
  endif()
  set(_cuda_rt_target_default "${CMAKE_BINARY_DIR}/cuda-rt-cargo")
endif()
set(CUDA_RT_INTEROP_CARGO_TARGET_DIR "${_cuda_rt_target_default}" CACHE PATH
  "cargo's target folder for libcuda_rt_interop.a")
set(CUDA_RT_INTEROP_CUDA_PATH "${CMAKE_CUDA_COMPILER_TOOLKIT_ROOT}" CACHE PATH
  "CUDA toolkit cargo builds with (empty: cargo's own search)")
find_program(CUDA_RT_INTEROP_CARGO cargo HINTS "$ENV{CARGO_HOME}/bin" "$ENV{HOME}/.cargo/bin")
if(NOT CUDA_RT_INTEROP_CARGO)
  message(FATAL_ERROR
    "cuda_rt_interop: cargo not found: install Rust (https://rustup.rs) or set "
    "CUDA_RT_INTEROP_CARGO to the cargo executable")
endif()

# CUDA_RT_ARCHS from CMAKE_CUDA_ARCHITECTURES, so that both sides build for the same GPUs.
set(_cuda_rt_archs "")
foreach(_arch IN LISTS CMAKE_CUDA_ARCHITECTURES)
  if(_arch MATCHES "^([0-9]+[a-z]?)-real$")
    list(APPEND _cuda_rt_archs "sm_${CMAKE_MATCH_1}")
  elseif(_arch MATCHES "^([0-9]+[a-z]?)-virtual$")
    list(APPEND _cuda_rt_archs "compute_${CMAKE_MATCH_1}")
  elseif(_arch MATCHES "^[0-9]+[a-z]?$")
    list(APPEND _cuda_rt_archs "${_arch}")
  endif()
endforeach()
list(JOIN _cuda_rt_archs "," _cuda_rt_archs)
# auto: derived again at every configure from CMAKE_CUDA_ARCHITECTURES as it is when
# find_package runs (never frozen in the cache), so a re-configure with other architectures
# rebuilds the kernels for them.
set(CUDA_RT_INTEROP_ARCHS "auto" CACHE STRING
  "CUDA_RT_ARCHS for the Rust kernels (auto: from CMAKE_CUDA_ARCHITECTURES; empty: cargo's own)")
if(NOT CUDA_RT_INTEROP_ARCHS STREQUAL "auto")
  set(_cuda_rt_archs "${CUDA_RT_INTEROP_ARCHS}")
endif()
set(CUDA_RT_INTEROP_CARGO_FLAGS "" CACHE STRING
  "further arguments of the cargo build of libcuda_rt_interop.a (a CMake list)")

if(CUDA_RT_INTEROP_RUNTIME STREQUAL "static")
  set(_cuda_rt_features "")
elseif(CUDA_RT_INTEROP_RUNTIME STREQUAL "shared")
  set(_cuda_rt_features --no-default-features --features dynamic)
else()
  message(FATAL_ERROR "cuda_rt_interop: CUDA_RT_INTEROP_RUNTIME is static or shared, "
    "not '${CUDA_RT_INTEROP_RUNTIME}'")
endif()
if(CUDA_RT_INTEROP_PROFILE STREQUAL "release")
  set(_cuda_rt_profile_flag --release)
elseif(CUDA_RT_INTEROP_PROFILE STREQUAL "debug")
  set(_cuda_rt_profile_flag "")
else()
  message(FATAL_ERROR "cuda_rt_interop: CUDA_RT_INTEROP_PROFILE is release or debug, "
    "not '${CUDA_RT_INTEROP_PROFILE}'")
endif()

set(_cuda_rt_env "CARGO_TARGET_DIR=${CUDA_RT_INTEROP_CARGO_TARGET_DIR}")
if(CUDA_RT_INTEROP_CUDA_PATH)
  list(APPEND _cuda_rt_env "CUDA_PATH=${CUDA_RT_INTEROP_CUDA_PATH}")
endif()
if(_cuda_rt_archs)
  list(APPEND _cuda_rt_env "CUDA_RT_ARCHS=${_cuda_rt_archs}")
endif()
set(_cuda_rt_cargo_library
  "${CUDA_RT_INTEROP_CARGO_TARGET_DIR}/${CUDA_RT_INTEROP_PROFILE}/libcuda_rt_interop.a")

# The symbols the consumer sees: the C functions of cuda_rt.h (the header cbindgen generates from
# the library's exports, so the list follows it), and, with the static runtime inside the
# library, the CUDA runtime's API (cuda*, __cuda*), which the consumer's own CUDA code calls.
# Everything else (Rust's standard library, the sort's internal entry points, the runtime's
# internals, compiler helpers) is made local, so that no symbol of the library can meet one of
# the program's.
file(STRINGS "${_cuda_rt_checkout}/interop/include/cuda_rt.h" _cuda_rt_declarations
  REGEX "^[A-Za-z0-9_ ]*[ *](cuda_rt_[a-z0-9_]+)\\(")
set(_cuda_rt_exports "")
foreach(_line IN LISTS _cuda_rt_declarations)
  if(_line MATCHES "(cuda_rt_[a-z0-9_]+)\\(")
    string(APPEND _cuda_rt_exports "${CMAKE_MATCH_1}\n")
  endif()
endforeach()
if(_cuda_rt_exports STREQUAL "")
  message(FATAL_ERROR "cuda_rt_interop: no function found in interop/include/cuda_rt.h")
endif()
if(CUDA_RT_INTEROP_RUNTIME STREQUAL "static")
  string(APPEND _cuda_rt_exports "cuda[A-Z]*\n__cuda*\n")
endif()
set(_cuda_rt_dir "${CMAKE_BINARY_DIR}/cuda_rt_interop")
file(WRITE "${_cuda_rt_dir}/exports.txt" "${_cuda_rt_exports}")
if(NOT CMAKE_OBJCOPY OR NOT CMAKE_AR OR NOT CMAKE_LINKER)
  message(FATAL_ERROR "cuda_rt_interop: needs binutils' ld, objcopy and ar (CMAKE_LINKER, "
    "CMAKE_OBJCOPY, CMAKE_AR) to keep the library's own symbols out of the program")
endif()
set(_cuda_rt_library "${_cuda_rt_dir}/libcuda_rt_interop.a")

# cargo runs on every build and rebuilds only what changed; then cargo's archive becomes one
# relocatable object (ld -r, every member), whose symbols outside exports.txt objcopy makes local,
# in an archive of its own: the library this target links (its byproduct, so that Ninja knows
# who makes it). objcopy also drops the LLVM bitcode that Rust's standard library carries for
# Rust's own link-time optimization: a C++ link has no use for it, and binutils' LTO plugin of
# another LLVM version aborts on reading it (when ar indexes the archive).
add_custom_target(cuda_rt_interop_cargo
  COMMAND "${CMAKE_COMMAND}" -E env ${_cuda_rt_env}
          "${CUDA_RT_INTEROP_CARGO}" build -p cuda-rt-interop --lib ${_cuda_rt_profile_flag}
          ${_cuda_rt_features} ${CUDA_RT_INTEROP_CARGO_FLAGS}
  COMMAND "${CMAKE_LINKER}" -r --whole-archive "${_cuda_rt_cargo_library}"
          -o "${_cuda_rt_dir}/cuda_rt_interop.o"
  COMMAND "${CMAKE_OBJCOPY}" --wildcard "--keep-global-symbols=${_cuda_rt_dir}/exports.txt"
          --remove-section=.llvmbc --remove-section=.llvmcmd "${_cuda_rt_dir}/cuda_rt_interop.o"
  COMMAND "${CMAKE_COMMAND}" -E rm -f "${_cuda_rt_library}"
  COMMAND "${CMAKE_AR}" qc "${_cuda_rt_library}" "${_cuda_rt_dir}/cuda_rt_interop.o"
  WORKING_DIRECTORY "${_cuda_rt_checkout}"
  BYPRODUCTS "${_cuda_rt_library}" "${_cuda_rt_dir}/cuda_rt_interop.o"
  COMMENT "cargo: building libcuda_rt_interop.a (${CUDA_RT_INTEROP_PROFILE}, "
          "${CUDA_RT_INTEROP_RUNTIME} CUDA runtime), its own symbols made local"
  USES_TERMINAL
  VERBATIM)

# What the library needs at link time besides itself: the system libraries of the Rust
# standard library and of the CUDA runtime; the device runtime's host half for the consumer's
# own relocatable device code (CMake links it only when it links a CUDA runtime itself, which
# CMAKE_CUDA_RUNTIME_LIBRARY None turns off); the shared runtime in `shared` mode.
find_package(Threads REQUIRED)
set(_cuda_rt_link Threads::Threads ${CMAKE_DL_LIBS} rt m)
find_library(CUDA_RT_INTEROP_CUDADEVRT cudadevrt
  HINTS ${CMAKE_CUDA_IMPLICIT_LINK_DIRECTORIES} "${CMAKE_CUDA_COMPILER_TOOLKIT_ROOT}/lib64"
        "${CMAKE_CUDA_COMPILER_TOOLKIT_ROOT}/lib"
  NO_DEFAULT_PATH)
if(CUDA_RT_INTEROP_CUDADEVRT)
  list(APPEND _cuda_rt_link "${CUDA_RT_INTEROP_CUDADEVRT}")
endif()
if(CUDA_RT_INTEROP_RUNTIME STREQUAL "shared")
  # libcudart.so, or the versioned file alone (PyPI wheels ship only libcudart.so.<major>).
  find_library(CUDA_RT_INTEROP_CUDART
    NAMES cudart libcudart.so.13 libcudart.so.12
    HINTS ${CMAKE_CUDA_IMPLICIT_LINK_DIRECTORIES} "${CMAKE_CUDA_COMPILER_TOOLKIT_ROOT}/lib64"
          "${CMAKE_CUDA_COMPILER_TOOLKIT_ROOT}/lib"
    NO_DEFAULT_PATH)
  if(NOT CUDA_RT_INTEROP_CUDART)
    message(FATAL_ERROR "cuda_rt_interop: no libcudart.so in the toolkit of "
      "${CMAKE_CUDA_COMPILER}; set CUDA_RT_INTEROP_CUDART to it")
  endif()
  list(APPEND _cuda_rt_link "${CUDA_RT_INTEROP_CUDART}")
  # Where the program finds it at run time (CMake adds no run path for a versioned file name).
  get_filename_component(_cuda_rt_cudart_dir "${CUDA_RT_INTEROP_CUDART}" DIRECTORY)
  set(_cuda_rt_link_options "$<HOST_LINK:LINKER:-rpath,${_cuda_rt_cudart_dir}>")
else()
  set(_cuda_rt_link_options "")
endif()

add_library(cuda_rt::interop STATIC IMPORTED GLOBAL)
set_target_properties(cuda_rt::interop PROPERTIES
  IMPORTED_LOCATION "${_cuda_rt_library}"
  INTERFACE_INCLUDE_DIRECTORIES
    "${_cuda_rt_checkout}/interop/include;${CMAKE_CUDA_TOOLKIT_INCLUDE_DIRECTORIES}"
  INTERFACE_LINK_LIBRARIES "${_cuda_rt_link}"
  INTERFACE_LINK_OPTIONS "${_cuda_rt_link_options}"
  # Device-linked already: never part of a consumer's device link (see above).
  CUDA_RESOLVE_DEVICE_SYMBOLS ON)
add_dependencies(cuda_rt::interop cuda_rt_interop_cargo)

unset(_cuda_rt_archs)
unset(_cuda_rt_checkout)
unset(_cuda_rt_env)
unset(_cuda_rt_features)
unset(_cuda_rt_library)
unset(_cuda_rt_cargo_library)
unset(_cuda_rt_declarations)
unset(_cuda_rt_exports)
unset(_cuda_rt_dir)
unset(_line)
unset(_cuda_rt_link)
unset(_cuda_rt_link_options)
unset(_cuda_rt_cudart_dir)
unset(_cuda_rt_profile_flag)
