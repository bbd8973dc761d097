#!/usr/bin/env bash
# Spark GPU discovery script: prints the node's NVIDIA GPUs as a Spark resource, e.g.
#   {"name": "gpu", "addresses": ["0", "1"]}
# Use it for spark.worker.resource.gpu.discoveryScript (standalone) or
# spark.executor.resource.gpu.discoveryScript (YARN, Kubernetes); find its path with
#   python -c "import mmlspark.onnx as o; print(o.gpu_discovery_script())"
# Without nvidia-smi, or without GPUs, it reports none.
set -euo pipefail
addresses=""
if command -v nvidia-smi >/dev/null 2>&1; then
  while read -r index; do
    index="${index//[[:space:]]/}"
    [[ "$index" =~ ^[0-9]+$ ]] || continue
    addresses="${addresses:+$addresses, }\"$index\""
  done < <(nvidia-smi --query-gpu=index --format=csv,noheader 2>/dev/null || true)
fi
echo "{\"name\": \"gpu\", \"addresses\": [$addresses]}"
