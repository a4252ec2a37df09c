#!/usr/bin/env bash
# The edge's figures, each `--direct-writes` mode against `off` (every answer through ASGI
# send) in one run: 10,000 long polls and 10,000 SSE streams woken on one queue, GET /flow
# during polls of 10,000 queues, and a wake-up's CPU per connection against a bare write.
# Under 9 minutes on the 2-core build machine, loaded (each step's time:
# docs/benchmarks.md#direct-writes-against-send). Run it with nothing else on the machine,
# from the repository, after `bash deploy/bootstrap.sh test`; everything goes to stdout.
set -euo pipefail
cd "$(dirname "$0")/.."
bash deploy/ensure-rabbitmq.sh >/dev/null
echo "$(date -u '+%F %T UTC'), $(git rev-parse --short HEAD), $(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg)"
time .venv/bin/python bench/longpoll_wakeup.py --waiters 10000 --rounds 1 --kinds polls,sse \
    --modes off,on
# starts the 10,000-queue node `flowscale` (deploy/rabbitmq-node.sh) when it is not running;
# --keep-queues leaves its queues for the next run
time .venv/bin/python bench/ten_thousand_queues.py --seconds 60 --keep-queues \
    --sources "auto --direct-writes off,auto --direct-writes on"
time .venv/bin/python bench/wake_write_cost.py
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)"
