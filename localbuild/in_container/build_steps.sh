#!/usr/bin/env bash
# Build one .ci_support config: run by build-locally.py inside the config's container image
# (conda-forge's linux-anvil images: base env in /opt/conda, user `conda` created from
# HOST_USER_ID by the image's entrypoint) or on the host with --native.
#
# Steps: configure conda -> install conda-build (container only) -> build the recipe with
# -m CONFIG_FILE into build_artifacts/ -> [upload] -> index build_artifacts/ -> done-marker.
# The done-marker is written last, so it exists only when every step before it succeeded.
#
# Input (environment, set by build-locally.py):
#   CONFIG            config name (.ci_support/<CONFIG>.yaml)              required
#   CONFIG_FILE       variant config to build with (a derived copy for --python)
#   CONFIG_CUDA_VERSION  a CUDA config's CUDA version (CONDA_OVERRIDE_CUDA for the tests)
#   DONE_MARKER       marker file name in build_artifacts/ (dev builds get their own)
#   CHANNEL_SOURCES   comma-separated channels (the config's channel_sources)
#   FEEDSTOCK_ROOT, RECIPE_ROOT   default to the container mount points
#   BUILD_TOOL=conda-build|rattler-build   rattler-build builds recipe/recipe.yaml (container:
#                     installed from the channels; native: RATTLER_BUILD_PYTHON set means
#                     py-rattler-build in that Python, via localbuild/in_container/rattler_build_py.py)
#   LOCALBUILD_NATIVE=1   on the host (--native): nothing installed, the host's conda settings
#   BUILD_WITH_CONDA_DEBUG=1 [BUILD_OUTPUT_ID]   conda debug, then an interactive shell
#   UPLOAD_PACKAGES=True + BINSTAR_TOKEN/ANACONDA_API_TOKEN   upload after the build
#   EXTRA_CB_OPTIONS  extra conda-build arguments (split on whitespace, no globbing)
#   TEST_ONLY=1       test the config's packages already in build_artifacts/ (built by another
#                     machine, e.g. CI's CPU build job; run on a GPU machine) instead of building
#   SKIP_TESTS=1      build without the packages' tests (conda-build --no-test, rattler-build --test skip)
#   SKIP_INDEX=1      build without indexing build_artifacts/ (a Slurm array task: the final
#                     job indexes once, so concurrent tasks never race on repodata.json)
#   INDEX_ONLY=1      only index build_artifacts/ (that final job)
#   TASK_OUTPUT_DIR   build in this folder of its own (a Slurm array task: two builds in one
#                     output folder race on its work folders), then move the packages into
#                     build_artifacts/<subdir>/ and remove the folder; kept when the build fails
#   HOST_USER_ID      in a container that runs as root: build_artifacts/ is handed back to this
#                     user when the script ends, whether the build worked or not
#   DEVELOP_SOURCE    --develop: the checkout to build (DEVELOP_DIR, DEVELOP_PYTHON, DEVELOP_SHELL:
#                     localbuild/in_container/develop.py) instead of the recipe's packages
#   SOURCE_TARBALL    the recipe's source, fetched elsewhere (--source-tarball; its sha256 was
#                     checked): conda-build finds it in its source cache as SOURCE_CACHE_NAME
#                     (copied there, --cache-dir); rattler-build's RECIPE_ROOT is a derived copy
#                     of recipe/ whose first url is this file
set -euo pipefail

step() { echo "::build-locally-step:: $*"; }

: "${CONFIG:?CONFIG must name a config in .ci_support/}"
FEEDSTOCK_ROOT="${FEEDSTOCK_ROOT:-/home/conda/feedstock_root}"
RECIPE_ROOT="${RECIPE_ROOT:-/home/conda/recipe_root}"
CONFIG_FILE="${CONFIG_FILE:-${FEEDSTOCK_ROOT}/.ci_support/${CONFIG}.yaml}"
DONE_MARKER="${DONE_MARKER:-conda-forge-build-done-${CONFIG}}"
ARTIFACTS="${FEEDSTOCK_ROOT}/build_artifacts"
NATIVE="${LOCALBUILD_NATIVE:-0}"
BUILD_TOOL="${BUILD_TOOL:-conda-build}"
export PYTHONUNBUFFERED=1

index_artifacts() {
    step "index build_artifacts"
    if [[ -n "${RATTLER_BUILD_PYTHON:-}" ]] && ! command -v conda >/dev/null 2>&1; then
        "${RATTLER_BUILD_PYTHON}" "${FEEDSTOCK_ROOT}/localbuild/in_container/rattler_build_py.py" index "${ARTIFACTS}"
    elif conda index --help >/dev/null 2>&1; then
        conda index "${ARTIFACTS}"
    else
        python -m conda_index "${ARTIFACTS}"
    fi
}
# before the config file is read: the final job of a Slurm array indexes even when the task
# that would have written a derived config never started
if [[ "${INDEX_ONLY:-0}" == 1 ]]; then
    index_artifacts
    step "done (index only)"
    exit 0
fi

step "configure conda"
if [[ ! -f "${CONFIG_FILE}" ]]; then
    echo "build_steps.sh: error: config file ${CONFIG_FILE} not found" >&2
    exit 2
fi
upload="${UPLOAD_PACKAGES:-False}"
if [[ "${upload}" == True && -z "${ANACONDA_API_TOKEN:-${BINSTAR_TOKEN:-}}" ]]; then
    # checked before anything is installed or built: a build takes hours
    echo "build_steps.sh: error: UPLOAD_PACKAGES=True but no BINSTAR_TOKEN/ANACONDA_API_TOKEN; set one or build without uploading" >&2
    exit 3
fi
mkdir -p "${ARTIFACTS}"
hand_back() {
    # images without conda-forge's entrypoint run as root: the user must own what we wrote
    if [[ "$(id -u)" == 0 && -n "${HOST_USER_ID:-}" && "${HOST_USER_ID}" != 0 ]]; then
        chown -R "${HOST_USER_ID}" "${ARTIFACTS}" || echo "build_steps.sh: could not chown ${ARTIFACTS} to ${HOST_USER_ID}" >&2
    fi
}
if [[ "${NATIVE}" != 1 ]]; then
    trap hand_back EXIT
fi
if [[ -n "${DEVELOP_SOURCE:-}" ]]; then
    # --develop: the develop environment and the driver's develop step (or a shell), no package
    step "develop ${DEVELOP_SOURCE}"
    if [[ -z "${RATTLER_BUILD_PYTHON:-}" ]]; then
        echo "build_steps.sh: error: --develop makes its environment with py-rattler-build and py-rattler, and this image names no Python with them (RATTLER_BUILD_PYTHON); build the image with devtools/stand_in_image.py or use --native" >&2
        exit 3
    fi
    FEEDSTOCK_ROOT="${FEEDSTOCK_ROOT}" RECIPE_ROOT="${RECIPE_ROOT}" CONFIG_FILE="${CONFIG_FILE}" \
        "${RATTLER_BUILD_PYTHON}" "${FEEDSTOCK_ROOT}/localbuild/in_container/develop.py"
    exit 0
fi
channel_args=()
IFS=',' read -r -a channels <<< "${CHANNEL_SOURCES:-conda-forge}"
for channel in ${channels[@]+"${channels[@]}"}; do
    if [[ -n "${channel}" ]]; then
        channel_args+=(--channel "${channel}")
    fi
done
if [[ "${NATIVE}" != 1 ]]; then
    # the container's package cache lives on the host, so re-runs download nothing twice
    export CONDA_PKGS_DIRS="${ARTIFACTS}/pkg_cache"
    export CONDA_BLD_PATH="${ARTIFACTS}"
    export RATTLER_CACHE_DIR="${ARTIFACTS}/pkg_cache/rattler"
fi
# an image that brings its own rattler-build (RATTLER_BUILD_PYTHON: py-rattler-build, as
# devtools/stand_in_image.py makes) needs no conda: nothing to bootstrap or install
tool_in_image=0
if [[ "${NATIVE}" != 1 && "${BUILD_TOOL}" == rattler-build && ( -n "${RATTLER_BUILD_PYTHON:-}" || -n "$(command -v rattler-build)" ) ]]; then
    tool_in_image=1
fi
croot="${CONDA_BLD_PATH:-${ARTIFACTS}}"
OUTPUT="${ARTIFACTS}"
if [[ -n "${TASK_OUTPUT_DIR:-}" ]]; then
    OUTPUT="${TASK_OUTPUT_DIR}"
    croot="${OUTPUT}"
fi

if [[ "${NATIVE}" != 1 && "${tool_in_image}" != 1 ]] && ! command -v conda >/dev/null 2>&1; then
    # Images without conda (the ROCm build image is AlmaLinux with /opt/rocm only): install
    # Miniforge once into build_artifacts/, so later builds of any config reuse it.
    if [[ -x "${ARTIFACTS}/miniforge/bin/conda" ]]; then
        :
    else
        step "bootstrap conda (Miniforge)"
        url="${MINIFORGE_URL:-https://github.com/conda-forge/miniforge/releases/latest/download/Miniforge3-Linux-$(uname -m).sh}"
        installer_file="${ARTIFACTS}/.miniforge-installer.sh"
        if command -v curl >/dev/null 2>&1; then
            fetch=(curl -fsSL -o "${installer_file}" "${url}")
        elif command -v wget >/dev/null 2>&1; then
            fetch=(wget -q -O "${installer_file}" "${url}")
        else
            echo "build_steps.sh: error: the image has neither conda nor curl/wget; use an image with conda or set MINIFORGE_URL to a reachable installer" >&2
            exit 3
        fi
        if ! "${fetch[@]}"; then
            echo "build_steps.sh: error: could not download Miniforge from ${url}; set MINIFORGE_URL to a reachable installer" >&2
            exit 3
        fi
        rm -rf "${ARTIFACTS}/miniforge.partial"
        bash "${installer_file}" -b -p "${ARTIFACTS}/miniforge.partial"
        rm -rf "${ARTIFACTS}/miniforge"   # a broken earlier bootstrap (no bin/conda): replaced
        mv "${ARTIFACTS}/miniforge.partial" "${ARTIFACTS}/miniforge"
        rm -f "${installer_file}"
    fi
    export PATH="${ARTIFACTS}/miniforge/bin:${PATH}"
fi

if [[ "${NATIVE}" != 1 && "${tool_in_image}" != 1 ]]; then
    step "install ${BUILD_TOOL}"
    installer=conda
    if command -v mamba >/dev/null 2>&1; then
        installer=mamba
    fi
    # conda-build before 25.3 rejects the recipe's build-string glob pins ("Mismatching hashes in
    # recipe"); localbuild/preflight.py (MIN_CONDA_BUILD) refuses the same for --native
    tools=("conda-build>=25.3" conda-index)
    if [[ "${BUILD_TOOL}" == rattler-build ]]; then
        tools=(rattler-build conda-index)
    fi
    if [[ "${upload}" == True ]]; then
        tools+=(anaconda-client)
    fi
    "${installer}" install --name base --yes --quiet --override-channels ${channel_args[@]+"${channel_args[@]}"} \
        "${tools[@]}"
fi

# --source-tarball for conda-build: it looks in <cache-dir>/src_cache/ before downloading
# (conda_build/source.py download_to_cache) and checks the sha256 of what it finds there
source_cache_args=()
if [[ -n "${SOURCE_TARBALL:-}" && "${BUILD_TOOL}" != rattler-build ]]; then
    cached="${croot}/src_cache/${SOURCE_CACHE_NAME:?SOURCE_CACHE_NAME names the file in the source cache}"
    mkdir -p "${croot}/src_cache"
    if ! cmp -s "${SOURCE_TARBALL}" "${cached}"; then
        cp "${SOURCE_TARBALL}" "${cached}.partial"
        mv -f "${cached}.partial" "${cached}"
    fi
    echo "build_steps.sh: source from --source-tarball: ${cached} (conda-build downloads nothing)"
    source_cache_args=(--cache-dir "${croot}")
fi

clobber=()
if [[ -f "${FEEDSTOCK_ROOT}/.ci_support/clobber_${CONFIG}.yaml" ]]; then
    clobber=(--clobber-file "${FEEDSTOCK_ROOT}/.ci_support/clobber_${CONFIG}.yaml")
fi
# split on whitespace only: `--output-id pytorch-*` must not expand to file names
read -r -a extra <<< "${EXTRA_CB_OPTIONS:-}"
if [[ "${SKIP_TESTS:-0}" == 1 ]]; then
    if [[ "${BUILD_TOOL}" == rattler-build ]]; then
        extra+=(--test skip)
    else
        extra+=(--no-test)
    fi
fi

if [[ "${BUILD_WITH_CONDA_DEBUG:-0}" == 1 ]]; then
    step "debug environment"
    debug_args=()
    if [[ -n "${BUILD_OUTPUT_ID:-}" ]]; then
        debug_args=(--output-id "${BUILD_OUTPUT_ID}")
    fi
    conda debug "${RECIPE_ROOT}" -m "${CONFIG_FILE}" ${channel_args[@]+"${channel_args[@]}"} --override-channels \
        ${clobber[@]+"${clobber[@]}"} ${debug_args[@]+"${debug_args[@]}"} ${extra[@]+"${extra[@]}"}
    echo "build_steps.sh: activate the environment with the command printed above; exit to finish"
    exec /bin/bash -i
fi

if [[ "${upload}" == True ]] && ! command -v anaconda >/dev/null 2>&1; then
    echo "build_steps.sh: error: uploading needs anaconda-client (conda install anaconda-client) or build without uploading" >&2
    exit 3
fi

# CUDA packages require the __cuda virtual package (no GPU build on driverless machines); the
# build machine or container usually has no driver, so tell conda which CUDA to assume, or the
# test environments of the CUDA outputs cannot be solved (CONFIG_CUDA_VERSION: build-locally.py
# read it from the config file, with the one reader of config files)
cuda_version="${CONFIG_CUDA_VERSION:-}"
if [[ -n "${cuda_version}" && -z "${CONDA_OVERRIDE_CUDA:-}" ]]; then
    export CONDA_OVERRIDE_CUDA="${cuda_version}"
    echo "build_steps.sh: CONDA_OVERRIDE_CUDA=${CONDA_OVERRIDE_CUDA} (CUDA ${cuda_version} config)"
fi

if [[ "${TEST_ONLY:-0}" == 1 && "${BUILD_TOOL}" == rattler-build ]]; then
    step "test packages"
    if [[ -z "${RATTLER_BUILD_PYTHON:-}" ]]; then
        echo "build_steps.sh: error: TEST_ONLY=1 with rattler-build needs py-rattler-build (RATTLER_BUILD_PYTHON) to find the config's packages; use --tool conda-build" >&2
        exit 3
    fi
    "${RATTLER_BUILD_PYTHON}" "${FEEDSTOCK_ROOT}/localbuild/in_container/rattler_build_py.py" index "${ARTIFACTS}"
    "${RATTLER_BUILD_PYTHON}" "${FEEDSTOCK_ROOT}/localbuild/in_container/rattler_build_py.py" test \
        --recipe "${RECIPE_ROOT}/recipe.yaml" -m "${CONFIG_FILE}" --ignore-recipe-variants --output-dir "${ARTIFACTS}"
    step "done (tests only: no done-marker)"
    exit 0
fi
if [[ "${TEST_ONLY:-0}" == 1 ]]; then
    step "test packages"
    packages=()
    while IFS= read -r package; do
        if [[ -f "${package}" ]]; then
            packages+=("${package}")
        fi
    done < <(conda build "${RECIPE_ROOT}" -m "${CONFIG_FILE}" --output --output-folder "${ARTIFACTS}" \
        --override-channels ${channel_args[@]+"${channel_args[@]}"} | grep -E '\.(conda|tar\.bz2)$')
    if [[ ${#packages[@]} -eq 0 ]]; then
        echo "build_steps.sh: error: TEST_ONLY=1 but no package of ${CONFIG} in ${ARTIFACTS}; build it first or fetch the build's artifact" >&2
        exit 3
    fi
    if conda index --help >/dev/null 2>&1; then   # the outputs depend on each other: a local channel
        conda index "${ARTIFACTS}"
    else
        python -m conda_index "${ARTIFACTS}"
    fi
    for package in "${packages[@]}"; do
        conda build --test "${package}" --override-channels --channel "${ARTIFACTS}" ${channel_args[@]+"${channel_args[@]}"}
    done
    step "done (tests only: no done-marker)"
    exit 0
fi

step "build recipe"
rm -f "${ARTIFACTS}/${DONE_MARKER}"   # a stale marker must not survive a failed rebuild
mkdir -p "${OUTPUT}"
if [[ "${BUILD_TOOL}" == rattler-build ]]; then
    # the same command line as localbuild/rattler.py build_command (shown by --dry-run); the
    # channels come from the config's channel_sources (rattler-build refuses -c as well)
    rattler=(rattler-build)
    if [[ -n "${RATTLER_BUILD_PYTHON:-}" ]]; then
        rattler=("${RATTLER_BUILD_PYTHON}" "${FEEDSTOCK_ROOT}/localbuild/in_container/rattler_build_py.py")
    fi
    "${rattler[@]}" build --recipe "${RECIPE_ROOT}/recipe.yaml" -m "${CONFIG_FILE}" \
        --ignore-recipe-variants --output-dir "${OUTPUT}" ${extra[@]+"${extra[@]}"}
else
    conda build "${RECIPE_ROOT}" -m "${CONFIG_FILE}" --croot "${croot}" --output-folder "${OUTPUT}" \
        --override-channels ${channel_args[@]+"${channel_args[@]}"} --suppress-variables ${clobber[@]+"${clobber[@]}"} \
        ${source_cache_args[@]+"${source_cache_args[@]}"} ${extra[@]+"${extra[@]}"}
fi

if [[ "${OUTPUT}" != "${ARTIFACTS}" ]]; then
    # the task's packages join the shared channel by rename (atomic on one filesystem)
    shopt -s nullglob
    for subdir_path in "${OUTPUT}"/*/; do
        subdir="$(basename "${subdir_path}")"
        case "${subdir}" in noarch|linux-*|osx-*|win-*) ;; *) continue ;; esac
        packages=("${subdir_path}"*.conda "${subdir_path}"*.tar.bz2)
        if [[ ${#packages[@]} -gt 0 ]]; then
            mkdir -p "${ARTIFACTS}/${subdir}"
            mv -f "${packages[@]}" "${ARTIFACTS}/${subdir}/"
            for package in "${packages[@]}"; do
                echo "::build-locally-package:: ${subdir}/$(basename "${package}")"
            done
        fi
    done
    shopt -u nullglob
    rm -rf "${OUTPUT}"
fi

if [[ "${upload}" == True ]]; then
    step "upload packages"
    token="${ANACONDA_API_TOKEN:-${BINSTAR_TOKEN:-}}"
    packages=()
    while IFS= read -r package; do
        packages+=("${package}")
    done < <(conda build "${RECIPE_ROOT}" -m "${CONFIG_FILE}" --output --output-folder "${ARTIFACTS}" \
        --override-channels ${channel_args[@]+"${channel_args[@]}"} | grep -E '\.(conda|tar\.bz2)$')
    ANACONDA_API_TOKEN="${token}" anaconda upload --skip-existing "${packages[@]}"
fi

if [[ "${SKIP_INDEX:-0}" == 1 ]]; then
    echo "build_steps.sh: SKIP_INDEX=1: build_artifacts/ is indexed once after the whole batch"
else
    index_artifacts
fi

step "done"
touch "${ARTIFACTS}/${DONE_MARKER}"
