#!/usr/bin/env python3
"""Shows that deploy/validate.sh can fail: each case breaks one thing in a copy of deploy/ and
asserts that the validator exits 1 and names the problem. A baseline case checks that the
unmodified copy passes, so a failure is the mutation's doing, and a change the validator must
accept (the scale changed in its one place) checks that S and P propagate. Prints one line per case and a
closing "N passed, M failed"; exits 1 if any case did not behave.

Usage: validate_mutations.py [--only NAME]   (run from anywhere; finds deploy/ next to tests/)
"""
from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
DEPLOY = REPO / "deploy"

SHARD_NO_COMMAND = "          # No command: the image's entrypoint sketchps-server runs as PID 1 and gets the SIGTERM.\n"
SHARD_WRAPPER = ("          command:\n            - /bin/sh\n            - -c\n"
                 "            - trap 'kill -TERM $pid; wait $pid; exit {rc}' TERM; sketchps-server \"$@\" & pid=$!; wait $pid\n"
                 "            - sketchps-server\n")
WORKER_SERVERS = '              value: "sketchps-server-{shard}.sketchps-server:7070"\n'
K8S_KEY_FLAG = "            - --checkpoint-key-file=/checkpoint-key/checkpoint.key\n"
K8S_KEY_MOUNT = "            - name: checkpoint-key\n              mountPath: /checkpoint-key\n              readOnly: true\n"
COMPOSE_KEY_WAIT = "    checkpoint-key: {condition: service_completed_successfully}\n"

# (name, file under deploy/, text to find, replacement, what the output must contain[, exit code]);
# the exit code is 1 (rejected) unless given: 0 marks a change the validator must accept.
CASES = [
    ("baseline", None, None, None, "all checks passed", 0),
    ("k8s unknown field", "k8s/base/servers.yaml",
     "  completionMode: Indexed\n", "  completionMode: Indexed\n  replica: 3\n",
     "'\"replica\"' does not exist in type 'JobSpec'"),
    ("k8s wrong type", "k8s/base/workers.yaml",
     "  backoffLimit: 6", "  backoffLimit: six", "backoffLimit must be integer"),
    ("k8s bad probe port", "k8s/base/servers.yaml",
     "          readinessProbe:\n            grpc:\n              port: 7071",
     "          readinessProbe:\n            grpc:\n              port: 7072",
     "readinessProbe.grpc.port 7072 is not a declared containerPort"),
    ("k8s liveness = readiness", "k8s/base/servers.yaml",
     "              service: liveness\n", "", "ask the same gRPC service name"),
    ("k8s no permanent exit code 3", "k8s/base/workers.yaml",
     "values: [2, 3]", "values: [2]", "does not FailJob on exit codes [3]"),
    ("k8s writable root", "k8s/base/workers.yaml",
     "readOnlyRootFilesystem: true", "readOnlyRootFilesystem: false", "readOnlyRootFilesystem is not true"),
    ("k8s network policy open", "k8s/base/network-policy.yaml",
     "      ports:\n        - port: 7070", "    - from:\n        - namespaceSelector: {}\n      ports:\n        - port: 7070",
     "to the shards' gRPC port"),
    ("kustomize broken", "k8s/overlays/gpu/kustomization.yaml", "path: worker-gpu.yaml", "path: missing.yaml",
     "overlay gpu does not build"),
    # The daemons end with the job: the shards are an Indexed Job whose stopped pods are replaced.
    ("k8s shards as a StatefulSet", "k8s/base/servers.yaml",
     "apiVersion: batch/v1\nkind: Job\nmetadata:\n  name: sketchps-server",
     "apiVersion: apps/v1\nkind: StatefulSet\nmetadata:\n  name: sketchps-server",
     "restarts a pod that exited at the end of the job forever"),
    # The shard runs as the container's process and exits 143 after a SIGTERM drain; a wrapper
    # that turns that into 0 completes the index, one that turns it into 2 fails the Job.
    ("k8s drained shard completes its index", "k8s/base/servers.yaml", SHARD_NO_COMMAND,
     SHARD_WRAPPER.format(rc=0), "exits 0 when the shard is stopped with SIGTERM"),
    ("k8s drained shard fails the Job", "k8s/base/servers.yaml", SHARD_NO_COMMAND,
     SHARD_WRAPPER.format(rc=2), "exits 2 when the shard is stopped with SIGTERM: the podFailurePolicy fails"),
    ("k8s shard id not from the completion index", "k8s/base/servers.yaml",
     "            - name: SKETCHPS_SHARD\n              valueFrom:\n                fieldRef:\n"
     "                  fieldPath: metadata.annotations['batch.kubernetes.io/job-completion-index']\n",
     '            - name: SKETCHPS_SHARD\n              value: "0"\n', "the pod of completion index 1 runs shard 0"),
    ("k8s no permanent exit code for the shards", "k8s/base/servers.yaml",
     "          values: [2, 4]", "          values: [1]", "does not FailJob on exit codes [2, 4]"),
    ("k8s idle shard retried", "k8s/base/servers.yaml",
     "          values: [2, 4]", "          values: [2]", "does not FailJob on exit codes [4]"),
    ("k8s shard idle exit within the workers' patience", "k8s/base/servers.yaml",
     "--idle-exit-seconds=3600", "--idle-exit-seconds=900",
     "--idle-exit-seconds 900 < 2 x the workers' --patience-seconds 600"),
    ("k8s PDB that blocks every drain", "k8s/base/servers.yaml", "            sizeLimit: 256Mi\n",
     "            sizeLimit: 256Mi\n---\napiVersion: policy/v1\nkind: PodDisruptionBudget\nmetadata:\n"
     "  name: sketchps-server\nspec:\n  maxUnavailable: 1\n  selector:\n    matchLabels:\n"
     "      app.kubernetes.io/name: sketchps\n      app.kubernetes.io/component: server\n",
     "the budget allows no eviction at all"),
    # TLS: certificates from Secrets the manifests mount but do not define.
    ("k8s certificate Secret defined in the base", "k8s/base/kustomization.yaml", "configMapGenerator:\n",
     "secretGenerator:\n  - name: sketchps-worker-certs\n    literals: [ca.pem=x]\n    options: {disableNameSuffixHash: true}\n"
     "configMapGenerator:\n", "Secret/sketchps-worker-certs: the daemons read their certificates or checkpoint key from this Secret"),
    ("k8s placeholder Secret", "k8s/base/kustomization.yaml", "configMapGenerator:\n",
     "secretGenerator:\n  - name: sketchps-token\n    literals: [token=]\n    options: {disableNameSuffixHash: true}\n"
     "configMapGenerator:\n", "placeholder Secret (empty values)"),
    ("k8s worker without the certificates", "k8s/base/workers.yaml",
     "            - name: certs\n              mountPath: /certs\n              readOnly: true\n", "",
     "the TLS folder /certs is not the mount of a Secret volume"),
    ("k8s shard without a TLS folder", "k8s/base/servers.yaml",
     "            - name: SKETCHPS_TLS_DIR\n              value: /certs\n", "", "no TLS folder"),
    ("k8s shard runs --insecure", "k8s/base/servers.yaml",
     "            - --listen=0.0.0.0:7070\n", "            - --listen=0.0.0.0:7070\n            - --insecure\n",
     "runs --insecure"),
    ("k8s certificates writable", "k8s/base/servers.yaml",
     "              mountPath: /certs\n              readOnly: true\n", "              mountPath: /certs\n",
     "the certificates' volume certs is not mounted readOnly"),
    ("k8s certificates unreadable", "k8s/base/workers.yaml",
     "        fsGroup: 10001             # group of the Secret's files (mode 0440)\n", "",
     "are not readable by the pod's user"),
    # The checkpoint key: a flag naming a file of a read-only Secret mount, one Secret for both roles.
    ("k8s shard without the checkpoint key", "k8s/base/servers.yaml", K8S_KEY_FLAG, "",
     "Job/sketchps-server container server: no checkpoint key"),
    ("k8s worker without the checkpoint key", "k8s/base/workers.yaml", K8S_KEY_FLAG, "",
     "Job/sketchps-worker container worker: no checkpoint key"),
    ("k8s worker's checkpoint key not mounted", "k8s/base/workers.yaml", K8S_KEY_MOUNT, "",
     "the checkpoint key file /checkpoint-key/checkpoint.key is not in the mount of a Secret volume"),
    ("k8s checkpoint key writable", "k8s/base/servers.yaml", K8S_KEY_MOUNT,
     K8S_KEY_MOUNT.replace("              readOnly: true\n", ""), "the checkpoint key's volume checkpoint-key is not mounted readOnly"),
    ("k8s checkpoint key Secret defined in the base", "k8s/base/kustomization.yaml", "configMapGenerator:\n",
     "secretGenerator:\n  - name: sketchps-checkpoint-key\n    literals: [checkpoint.key=0123456789abcdef0123456789abcdef]\n"
     "    options: {disableNameSuffixHash: true}\nconfigMapGenerator:\n",
     "Secret/sketchps-checkpoint-key: the daemons read their certificates or checkpoint key from this Secret"),
    ("k8s shards and workers with different checkpoint keys", "k8s/base/workers.yaml",
     "            secretName: sketchps-checkpoint-key\n", "            secretName: sketchps-worker-checkpoint-key\n",
     "the daemons read different checkpoint keys"),
    ("k8s probe on the TLS port", "k8s/base/servers.yaml",
     "          livenessProbe:\n            grpc:\n              port: 7071",
     "          livenessProbe:\n            grpc:\n              port: 7070",
     "livenessProbe.grpc.port 7070 is not the plaintext health port"),
    # S and P: one setting, agreed on everywhere.
    ("k8s scale changed in its one place", "k8s/base/kustomization.yaml",
     "      - workers=2\n      - servers=2\n", "      - workers=5\n      - servers=4\n", "all checks passed", 0),
    ("k8s overlay sets the scale without the component", "k8s/overlays/example/kustomization.yaml",
     "  - ../../components/scale\n", "", "the one setting says servers 3, workers 4"),
    ("k8s setting not carried into the shard Job", "k8s/components/scale/kustomization.yaml",
     "          - spec.completions\n          - spec.parallelism\n", "",
     "the one setting says servers 3, workers 4, but the Jobs run S = 2"),
    ("k8s WORLD_SIZE by hand", "k8s/base/workers.yaml",
     "              value: $(SKETCHPS_WORKER_COUNT)", '              value: "3"', "WORLD_SIZE 3 != P = 2"),
    ("k8s server list port", "k8s/base/workers.yaml", WORKER_SERVERS, WORKER_SERVERS.replace(":7070", ":7071"),
     "servers 'sketchps-server-{shard}.sketchps-server:7071' (expanded: "
     "'sketchps-server-0.sketchps-server:7071,sketchps-server-1.sketchps-server:7071')"),
    ("k8s server address without {shard}", "k8s/base/workers.yaml", WORKER_SERVERS,
     WORKER_SERVERS.replace("{shard}", "0"), "servers 'sketchps-server-0.sketchps-server:7070' != "
     "'sketchps-server-0.sketchps-server:7070,sketchps-server-1.sketchps-server:7070'"),
    # A list spelled out for the base's S = 2 does not follow the one setting (example: S = 3).
    ("k8s server list spelled out", "k8s/base/workers.yaml", WORKER_SERVERS,
     WORKER_SERVERS.replace("sketchps-server-{shard}.sketchps-server:7070",
                            "sketchps-server-0.sketchps-server:7070,sketchps-server-1.sketchps-server:7070"),
     "!= 'sketchps-server-0.sketchps-server:7070,sketchps-server-1.sketchps-server:7070,"
     "sketchps-server-2.sketchps-server:7070'"),
    ("k8s shard not told the number of workers", "k8s/base/servers.yaml",
     "            - --set=workers=$(SKETCHPS_WORKER_COUNT)\n", "",
     "the shard runs with workers 2, servers 3"),
    # compose
    ("compose unknown key", "compose/docker-compose.yml",
     "  server-1:\n", "  server-1:\n    imagee: nope\n", "must NOT have additional properties ('imagee')"),
    ("compose missing healthcheck", "compose/docker-compose.yml",
     "  healthcheck:\n    test: [\"CMD\", \"sketchps\", \"health\", \"127.0.0.1:7071\"]\n"
     "    interval: 2s\n    timeout: 2s\n    retries: 30\n    start_period: 120s\n", "",
     "server-0: no healthcheck"),
    ("compose healthcheck on the TLS port", "compose/docker-compose.yml",
     '"health", "127.0.0.1:7071"', '"health", "127.0.0.1:7070"', "does not run `sketchps health HOST:7071`"),
    ("compose worker not waiting for health", "compose/docker-compose.yml",
     "server-1: {condition: service_healthy}", "server-1: {condition: service_started}",
     "does not depend on server-1 with condition service_healthy"),
    ("compose wrong server list", "compose/docker-compose.yml",
     "      RANK: \"1\"\n      WORLD_SIZE: \"2\"\n      SKETCHPS_SERVERS: \"server-{shard}:7070\"",
     "      RANK: \"1\"\n      WORLD_SIZE: \"2\"\n      SKETCHPS_SERVERS: server-1:7070,server-0:7070",
     "worker-1: servers 'server-1:7070,server-0:7070' != 'server-0:7070,server-1:7070'"),
    ("compose server address pattern", "compose/docker-compose.yml",
     "      RANK: \"1\"\n      WORLD_SIZE: \"2\"\n      SKETCHPS_SERVERS: \"server-{shard}:7070\"",
     "      RANK: \"1\"\n      WORLD_SIZE: \"2\"\n      SKETCHPS_SERVERS: \"shard-{shard}:7070\"",
     "worker-1: servers 'shard-{shard}:7070' (expanded: 'shard-0:7070,shard-1:7070') != 'server-0:7070,server-1:7070'"),
    ("compose shard restarts without a limit", "compose/docker-compose.yml",
     '  restart: "on-failure:3"\n  stop_grace_period: 60s', "  restart: on-failure\n  stop_grace_period: 60s",
     "server-0: restart is 'on-failure' without a limit"),
    ("compose shard idle exit within the workers' patience", "compose/docker-compose.yml",
     '"--idle-exit-seconds=3600"', '"--idle-exit-seconds=500"',
     "--idle-exit-seconds 500 < 2 x the workers' --patience-seconds 300"),
    ("compose services vs job spec", "k8s/base/job.yaml", "workers: 2", "workers: 3", "worker services != workers 3 in"),
    ("compose certificates for too few workers", "compose/docker-compose.yml",
     '"--workers", "2"', '"--workers", "1"', "certs --workers 1 != 2"),
    ("compose shard without the certificates volume", "compose/docker-compose.yml",
     "      - certs:/certs:ro\n      - checkpoints-0:", "      - checkpoints-0:",
     "server-0: the TLS folder /certs is not the volume certs"),
    ("compose daemons do not wait for the certificates", "compose/docker-compose.yml",
     "    certs: {condition: service_completed_successfully}\n" + COMPOSE_KEY_WAIT + "\nx-sketchps-worker",
     "    certs: {condition: service_started}\n" + COMPOSE_KEY_WAIT + "\nx-sketchps-worker", "service_completed_successfully"),
    ("compose shard without the checkpoint key", "compose/docker-compose.yml",
     '"--checkpoint-key-file=/certs/checkpoint.key",\n            ', "", "server-0: no checkpoint key"),
    ("compose worker without the checkpoint key", "compose/docker-compose.yml",
     'command: ["--patience-seconds=300", "--checkpoint-key-file=/certs/checkpoint.key"]',
     'command: ["--patience-seconds=300"]', "worker-1: no checkpoint key"),
    ("compose shards do not wait for the checkpoint key", "compose/docker-compose.yml",
     COMPOSE_KEY_WAIT + "\nx-sketchps-worker", "\nx-sketchps-worker",
     "server-0: does not wait for checkpoint-key (which makes the checkpoint key /certs/checkpoint.key)"),
    ("compose checkpoint key made by no one", "compose/docker-compose.yml",
     "        key=/certs/checkpoint.key\n", "        key=/tmp/checkpoint.key\n",
     "but no one-shot service writes that volume naming the file"),
    ("compose checkpoint key writable", "compose/docker-compose.yml",
     "      - certs:/certs:ro\n      - worker-state-1:", "      - certs:/certs\n      - worker-state-1:",
     "worker-1: mounts the checkpoint key's volume certs read-write"),
    ("compose insecure", "compose/docker-compose.yml",
     "    SKETCHPS_TLS_DIR: /certs\n", "    SKETCHPS_INSECURE: \"1\"\n", "runs --insecure"),
    ("compose one-shot service restarting", "compose/docker-compose.yml",
     '    restart: "no"                 # one-shot', "    restart: on-failure          # one-shot",
     "a one-shot service (others wait for it to complete) must be"),
    ("dockerfile root user", "docker/Dockerfile.cpu", "USER 10001:10001", "USER 0", "USER is root"),
    ("dockerfile unpinned base", "docker/Dockerfile.cuda", "debian:12.11-slim", "debian", "is not pinned to a tag"),
    ("dockerfile syntax", "docker/Dockerfile.cpu", "EXPOSE 7071", "EXPOSE seven", "Invalid containerPort"),
]


def run_case(case, validator: Path) -> tuple[bool, str]:
    name, rel, old, new, expect = case[:5]
    want_rc = case[5] if len(case) > 5 else 1
    with tempfile.TemporaryDirectory(prefix="sketchps-mutant-") as tmp:
        copy = Path(tmp) / "deploy"
        shutil.copytree(DEPLOY, copy, ignore=shutil.ignore_patterns("node_modules", "__pycache__"))
        if rel is not None:
            f = copy / rel
            text = f.read_text()
            if text.count(old) < 1:
                return False, f"mutation target not found in {rel} (update the case): {old!r}"
            f.write_text(text.replace(old, new, 1))
        proc = subprocess.run(["bash", str(validator), "--deploy-dir", str(copy)],
                              capture_output=True, text=True, timeout=600)
    out = proc.stdout + proc.stderr
    if proc.returncode != want_rc:
        return False, f"exit {proc.returncode}, expected {want_rc}\n{out}"
    if expect not in out:
        return False, f"output lacks {expect!r}\n{out}"
    return True, ""


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--only", help="run the case with this name only")
    args = ap.parse_args()
    validator = DEPLOY / "validate.sh"
    # Install the validators once up front so that each case's output is the validator's alone.
    subprocess.run(["bash", str(validator)], check=False, stdout=subprocess.DEVNULL)
    cases = [c for c in CASES if args.only in (None, c[0])]
    passed = failed = 0
    for case in cases:
        ok, detail = run_case(case, validator)
        print(f"{'ok  ' if ok else 'FAIL'} {case[0]}", flush=True)
        if not ok:
            print("     " + detail.replace("\n", "\n     "))
        passed, failed = passed + ok, failed + (not ok)
    print(f"{passed} passed, {failed} failed")
    return 0 if failed == 0 and passed > 0 else 1


if __name__ == "__main__":
    sys.exit(main())
