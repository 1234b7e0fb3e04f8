// Lints Dockerfiles offline (no Docker engine and no hadolint here). Two layers:
//  1. dockerfile-utils' validator (the Dockerfile language server's): unknown instructions and
//     flags, malformed arguments, duplicate stage names, ... every diagnostic is a finding.
//  2. This project's rules, on the dockerfile-ast parse:
//     - multi-stage (at least two FROM); base images pinned to a tag other than "latest" (or a
//       digest), after substituting the global ARG defaults; COPY --from names an earlier stage;
//     - every stage with an ENTRYPOINT runs as a numeric, non-zero USER (inherited through
//       FROM <stage> counts) and uses the exec (JSON array) form;
//     - apt-get install with -y and --no-install-recommends, and the same RUN removes
//       /var/lib/apt/lists; no ADD (COPY is explicit), no sudo;
//     - COPY sources (other than from a stage) exist in the build context.
// Usage: node dockerfile.mjs --context DIR DOCKERFILE...
import { existsSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { DockerfileParser } from "dockerfile-ast";
import { validate } from "dockerfile-utils";
import { finish, requireArgs } from "./common.mjs";

const args = requireArgs("dockerfile.mjs", "--context DIR DOCKERFILE...");
let context = ".";
const files = [];
for (let i = 0; i < args.length; i++) {
  if (args[i] === "--context") context = args[++i];
  else files.push(args[i]);
}

function substitute(text, argDefaults) {
  return text.replace(/\$\{?([A-Za-z_][A-Za-z0-9_]*)\}?/g, (m, name) => argDefaults.get(name) ?? m);
}

function lintOne(file, findings) {
  const content = readFileSync(file, "utf8");
  const add = (line, message) => findings.push({ file, where: `line ${line + 1}`, message });
  for (const d of validate(content)) add(d.range.start.line, `dockerfile-utils: ${d.message}`);

  const dockerfile = DockerfileParser.parse(content);
  const argDefaults = new Map();
  for (const a of dockerfile.getInitialARGs()) {
    const p = a.getProperty();
    if (p && p.getValue() !== null) argDefaults.set(p.getName(), p.getValue());
  }
  const froms = dockerfile.getFROMs();
  if (froms.length < 2) add(0, "not multi-stage: build and runtime belong in separate stages");

  const stages = new Map(); // name -> {parent, user, entrypoint}
  let current = null;
  for (const ins of dockerfile.getInstructions()) {
    const line = ins.getRange().start.line;
    const keyword = ins.getKeyword();
    const text = ins.getArgumentsContent() ?? "";
    if (keyword === "FROM") {
      const image = substitute(ins.getImageName() ?? "", argDefaults);
      const tag = ins.getImageTag() ? substitute(ins.getImageTag(), argDefaults) : null;
      const full = substitute(text.split(/\s+/)[0], argDefaults);
      const parent = stages.has(full) ? full : null;
      if (!parent && !/@sha256:/.test(full)) {
        const effectiveTag = tag ?? (full.includes(":") ? full.slice(full.lastIndexOf(":") + 1) : null);
        if (!effectiveTag || effectiveTag === "latest") add(line, `base image '${full || image}' is not pinned to a tag`);
      }
      current = { parent, user: null, entrypoint: null, line };
      stages.set(ins.getBuildStage() ?? `#${stages.size}`, current);
    } else if (current === null) {
      if (keyword !== "ARG") add(line, `${keyword} before the first FROM`);
    } else if (keyword === "USER") {
      current.user = text.trim();
    } else if (keyword === "ENTRYPOINT") {
      current.entrypoint = { text: text.trim(), line };
    } else if (keyword === "ADD") {
      add(line, "ADD: use COPY (explicit, no implicit download or unpacking)");
    } else if (keyword === "COPY") {
      const from = ins.getFlags().find((f) => f.getName() === "from");
      if (from) {
        if (!stages.has(from.getValue())) add(line, `COPY --from=${from.getValue()}: not an earlier stage`);
      } else {
        const parts = text.trim().split(/\s+/);
        for (const src of parts.slice(0, -1)) {
          if (!existsSync(join(context, src))) add(line, `COPY source '${src}' does not exist in the build context ${context}`);
        }
      }
    } else if (keyword === "RUN") {
      if (/\bsudo\b/.test(text)) add(line, "RUN uses sudo");
      if (/apt-get\s+install/.test(text)) {
        if (!/\s-y\b|--yes/.test(text)) add(line, "apt-get install without -y");
        if (!/--no-install-recommends/.test(text)) add(line, "apt-get install without --no-install-recommends");
        if (!/rm -rf \/var\/lib\/apt\/lists/.test(text)) add(line, "apt-get install without removing /var/lib/apt/lists in the same RUN");
      }
    }
  }
  for (const [name, stage] of stages) {
    if (!stage.entrypoint) continue;
    let user = null;
    for (let s = stage; s && user === null; s = s.parent ? stages.get(s.parent) : null) user = s.user;
    const uid = user === null ? null : user.split(":")[0];
    if (uid === null) add(stage.line, `stage '${name}' has an ENTRYPOINT but no USER: it would run as root`);
    else if (!/^[0-9]+$/.test(uid)) add(stage.line, `stage '${name}': USER '${user}' is not numeric (runAsNonRoot cannot verify a name)`);
    else if (Number(uid) === 0) add(stage.line, `stage '${name}': USER is root`);
    let exec = null;
    try { exec = JSON.parse(stage.entrypoint.text); } catch { /* shell form */ }
    if (!Array.isArray(exec) || exec.length === 0) add(stage.entrypoint.line, `stage '${name}': ENTRYPOINT is not in exec form (JSON array)`);
  }
}

const findings = [];
for (const file of files) lintOne(file, findings);
finish("dockerfile", findings, `${files.length} file(s)`);
