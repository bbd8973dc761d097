#!/usr/bin/env bash
# The GPU proof (issue 41): ONNXModel on CUDA measured on a lent GPU machine, from the kit that
# `make gpu-kit` cuts into parts (scripts/gpu_kit.py; the plan, the calls and the device time are
# in bench/README.md, "The GPU proof").
#
#   scripts/gpu_proof.sh --take gpu-kit/part-01            # on the machine: one part per call
#   scripts/gpu_proof.sh --take gpu-kit/part-04 --probe    # and, once ONNX Runtime, Java and the
#                                                          # jars are in, try CUDA from both
#   scripts/gpu_proof.sh --take gpu-kit/part-06 --run      # the last part, then the measurements
#   scripts/gpu_proof.sh --dry-run [--kit gpu-kit]         # here, on the CPU: every step but CUDA
#
# --take checks a part's SHA-256s and unpacks what is complete into $MMLSPARK_GPUKIT_HOME
# (/tmp/mmlspark-gpukit; it lasts while the machine stays warm). --run needs every part taken; it
# runs scripts/gpu_proof.py with deviceType=cuda inside the kit (the kit's Java, Spark, ONNX Runtime
# and the machine's CUDA 13 libraries from PyTorch's nvidia wheels) and writes bench/results/gpu.md,
# also into $OUT where the device tool sets it, with the log. --dry-run makes a mini kit from this
# venv and the built jars (or takes every part of --kit), then runs the same steps with
# deviceType=cpu on tiny sizes into bench/results/gpu-dry-run.md (or --out). Arguments after `--`
# go to scripts/gpu_proof.py. --probe (no Spark, a few seconds) runs a tiny model on the device
# with onnxruntime in Python and ONNX Runtime Java (bench/RawOrt.java), so that a provider that
# does not load is found while parts are still to come; the dry run probes first too.
set -euo pipefail
cd "$(dirname "$0")/.."

home=${MMLSPARK_GPUKIT_HOME:-/tmp/mmlspark-gpukit}
# The machine's python3 (PyTorch's, with its CUDA wheels); here the venv's, or GPU_PROOF_PYTHON.
py=python3
[ -x .venv/bin/python ] && py=$PWD/.venv/bin/python
py=$(command -v "${GPU_PROOF_PYTHON:-$py}")
takes=()
run=false
probe=false
dry=false
kit=
out=
extra=()
while [ $# -gt 0 ]; do
  case "$1" in
    --take) takes+=("$2"); shift 2 ;;
    --run) run=true; shift ;;
    --probe) probe=true; shift ;;
    --dry-run) dry=true; shift ;;
    --kit) kit=$2; shift 2 ;;
    --home) home=$2; shift 2 ;;
    --out) out=$2; shift 2 ;;
    --) shift; extra=("$@"); break ;;
    *) echo "gpu_proof.sh: unknown argument $1 (see the head of $0)" >&2; exit 2 ;;
  esac
done

start=$SECONDS
if $dry; then
  scratch=$(mktemp -d /tmp/gpu-proof-dry.XXXXXX)
  trap 'rm -rf "$scratch"' EXIT
  home=$scratch/home
  if [ -z "$kit" ]; then
    kit=$scratch/kit
    "$py" scripts/gpu_kit.py build --mini --out "$kit" --preset 0 --part-mib "${PART_MIB:-56}"
  fi
  takes=("$kit"/part-*)
  run=true
  probe=true
fi

if [ ${#takes[@]} -gt 0 ]; then
  "$py" scripts/gpu_kit.py take "${takes[@]}" --home "$home"
fi
$run || $probe || exit 0

if $run && ! left=$("$py" scripts/gpu_kit.py missing --home "$home"); then
  echo "gpu_proof.sh: the kit in $home lacks $left: take the other parts first" >&2
  exit 1
fi

export MMLSPARK_GPUKIT=$home/kit
export JAVA_HOME=$MMLSPARK_GPUKIT/jre
export SPARK_HOME=$MMLSPARK_GPUKIT/site/pyspark
export PYTHONPATH=$MMLSPARK_GPUKIT/site:$PWD${PYTHONPATH:+:$PYTHONPATH}
export PYSPARK_PYTHON=$py
export ORT_DISABLE_TELEMETRY=1
args=()
if $dry; then
  args+=(--device cpu --cores 2 --memory 2g --out "${out:-bench/results/gpu-dry-run.md}")
else
  # ONNX Runtime's CUDA provider links CUDA 13's cuBLAS, cudart and cuRAND and loads cuDNN 9: the
  # machine's PyTorch has them in its nvidia wheels.
  cuda=$("$py" scripts/gpu_kit.py cuda-libs)
  export MMLSPARK_GPUKIT_CUDA_LIBS=$cuda
  export LD_LIBRARY_PATH=$cuda${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
  args+=(--device cuda --out "${out:-bench/results/gpu.md}")
  nvidia-smi --query-gpu=name,driver_version,memory.used,memory.total --format=csv || true
fi
[ -n "${OUT:-}" ] && args+=(--copy-to "$OUT")
echo "[gpu-proof] kit ready after $((SECONDS - start)) s; java: $("$JAVA_HOME/bin/java" -version 2>&1 | head -1)"
if $probe; then
  device=cuda
  $dry && device=cpu
  for lib in "$MMLSPARK_GPUKIT"/site/onnxruntime/capi/libonnxruntime_providers_*.so; do
    [ -e "$lib" ] || continue
    echo "[gpu-proof] $(basename "$lib"): $(ldd "$lib" | grep -c 'not found') libraries not found"
    ldd "$lib" | grep 'not found' || true
  done
  timeout 120 "$py" scripts/gpu_proof.py --probe --device $device
  echo "[gpu-proof] probe done after $((SECONDS - start)) s"
fi
$run || exit 0
status=0
if [ -n "${OUT:-}" ]; then
  set -o pipefail
  timeout "${PROOF_TIMEOUT:-500}" "$py" scripts/gpu_proof.py "${args[@]}" "${extra[@]}" 2>&1 |
    tee "$OUT/gpu-proof.log" || status=$?
else
  timeout "${PROOF_TIMEOUT:-500}" "$py" scripts/gpu_proof.py "${args[@]}" "${extra[@]}" || status=$?
fi
echo "[gpu-proof] done in $((SECONDS - start)) s (exit $status)"
exit $status
