# Finds CUDA, cuDNN, cuBLAS and NCCL and builds the CUDA backend (cd_backend_cuda) when
# CDIGITS_CUDA is ON, or AUTO and everything is found. Sets CDIGITS_HAVE_CUDA.
# cuDNN and NCCL are looked for in the toolkit, under CUDNN_ROOT / NCCL_ROOT (CMake or
# environment variables), and in the system's default places.
set(CDIGITS_HAVE_CUDA OFF)
if(NOT CDIGITS_CUDA STREQUAL "OFF" AND NOT CDIGITS_FUZZ)
  if(NOT CMAKE_CUDA_COMPILER AND EXISTS /usr/local/cuda/bin/nvcc)
    set(CMAKE_CUDA_COMPILER /usr/local/cuda/bin/nvcc)
  endif()
  include(CheckLanguage)
  check_language(CUDA)
  find_package(CUDAToolkit QUIET)
  set(_cd_lib_hints ${CUDAToolkit_LIBRARY_DIR} ${CUDAToolkit_LIBRARY_ROOT}/lib
      ${CUDNN_ROOT}/lib ${CUDNN_ROOT}/lib64 ${NCCL_ROOT}/lib ${NCCL_ROOT}/lib64
      $ENV{CUDNN_ROOT}/lib $ENV{CUDNN_ROOT}/lib64 $ENV{NCCL_ROOT}/lib $ENV{NCCL_ROOT}/lib64)
  set(_cd_inc_hints ${CUDAToolkit_INCLUDE_DIRS} ${CUDNN_ROOT}/include ${NCCL_ROOT}/include
      $ENV{CUDNN_ROOT}/include $ENV{NCCL_ROOT}/include)
  find_path(CUDNN_INCLUDE_DIR cudnn.h HINTS ${_cd_inc_hints})
  find_library(CUDNN_LIBRARY NAMES cudnn libcudnn.so.9 HINTS ${_cd_lib_hints})
  find_path(NCCL_INCLUDE_DIR nccl.h HINTS ${_cd_inc_hints})
  find_library(NCCL_LIBRARY NAMES nccl libnccl.so.2 HINTS ${_cd_lib_hints})

  # versions, for the configure summary
  set(_cd_cudnn_version "not found")
  if(CUDNN_INCLUDE_DIR AND EXISTS ${CUDNN_INCLUDE_DIR}/cudnn_version.h)
    file(STRINGS ${CUDNN_INCLUDE_DIR}/cudnn_version.h _v REGEX "^#define CUDNN_(MAJOR|MINOR|PATCHLEVEL) ")
    string(REGEX REPLACE ".*CUDNN_MAJOR ([0-9]+).*CUDNN_MINOR ([0-9]+).*CUDNN_PATCHLEVEL ([0-9]+).*"
           "\\1.\\2.\\3" _cd_cudnn_version "${_v}")
  endif()
  set(_cd_nccl_version "not found")
  if(NCCL_INCLUDE_DIR)
    file(STRINGS ${NCCL_INCLUDE_DIR}/nccl.h _v REGEX "^#define NCCL_(MAJOR|MINOR|PATCH) ")
    string(REGEX REPLACE ".*NCCL_MAJOR ([0-9]+).*NCCL_MINOR ([0-9]+).*NCCL_PATCH ([0-9]+).*"
           "\\1.\\2.\\3" _cd_nccl_version "${_v}")
  endif()

  if(CMAKE_CUDA_COMPILER AND CUDAToolkit_FOUND AND CUDNN_LIBRARY AND CUDNN_INCLUDE_DIR
     AND NCCL_LIBRARY AND NCCL_INCLUDE_DIR)
    set(CDIGITS_HAVE_CUDA ON)
  endif()
  message(STATUS "cdigits: CUDA ${CUDAToolkit_VERSION} (${CMAKE_CUDA_COMPILER})")
  message(STATUS "cdigits: cuDNN ${_cd_cudnn_version} (${CUDNN_LIBRARY})")
  message(STATUS "cdigits: NCCL ${_cd_nccl_version} (${NCCL_LIBRARY})")
  if(CDIGITS_CUDA STREQUAL "ON" AND NOT CDIGITS_HAVE_CUDA)
    message(FATAL_ERROR "CDIGITS_CUDA=ON but CUDA, cuDNN or NCCL was not found; install them, "
                        "set CUDNN_ROOT / NCCL_ROOT, or use -DCDIGITS_CUDA=AUTO")
  endif()
endif()

if(CDIGITS_HAVE_CUDA)
  if(NOT CMAKE_CUDA_ARCHITECTURES)
    # machine code for Ampere (A100, A10/RTX 30), Ada (L4/L40, RTX 40) and Hopper, and
    # Hopper's PTX, which the driver compiles for newer chips
    set(CMAKE_CUDA_ARCHITECTURES 80-real 86-real 89-real 90)
  endif()
  enable_language(CUDA)
  set(CMAKE_CUDA_STANDARD 17)
  # -O3 for the host code as the C code has it (device code is always -O3)
  set(CMAKE_CUDA_FLAGS_RELEASE "-O3 -DNDEBUG")
  file(GLOB CD_CUDA_SRC CONFIGURE_DEPENDS ${CMAKE_SOURCE_DIR}/src/backend/cuda/*.c
                                          ${CMAKE_SOURCE_DIR}/kernels/*.cu)
  if(CD_CUDA_SRC)
    add_library(cd_backend_cuda STATIC ${CD_CUDA_SRC})
    target_include_directories(cd_backend_cuda PUBLIC ${CUDNN_INCLUDE_DIR} ${NCCL_INCLUDE_DIR}
                               PRIVATE ${CMAKE_SOURCE_DIR}/kernels ${CMAKE_SOURCE_DIR}/src/backend/cuda)
    # cudart linked statically: the worker starts (and finds no GPU) where libcudart.so
    # is absent; cuBLAS, cuDNN and NCCL stay shared libraries.
    target_link_libraries(cd_backend_cuda PUBLIC cd_common CUDA::cudart_static CUDA::cublas
                          CUDA::cublasLt ${CUDNN_LIBRARY} ${NCCL_LIBRARY})
    target_compile_definitions(cd_backend_cuda PUBLIC CDIGITS_HAVE_CUDA=1)
    set_target_properties(cd_backend_cuda PROPERTIES CUDA_SEPARABLE_COMPILATION OFF
                          CUDA_RUNTIME_LIBRARY Static)
    # The project's C flags (warnings, sanitizers) reach nvcc through -Xcompiler only;
    # kernels are built without fast math so they round like the CPU reference.
    target_compile_options(cd_backend_cuda PRIVATE
      $<$<COMPILE_LANGUAGE:C>:-Wno-deprecated-declarations>
      $<$<COMPILE_LANGUAGE:CUDA>:-Xcompiler=-fno-sanitize=all>)
  else()
    set(CDIGITS_HAVE_CUDA OFF)
  endif()
endif()
message(STATUS "cdigits: CUDA backend ${CDIGITS_HAVE_CUDA}")
