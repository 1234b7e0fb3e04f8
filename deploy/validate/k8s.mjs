// Validates rendered Kubernetes manifests (the output of `kustomize build`) offline, two ways:
//  1. kubernetes-models 4.5.1: the OpenAPI schemas of Kubernetes 1.27 compiled to validators
//     (required fields, types, enums, int-or-string). It ignores unknown fields.
//  2. kubernetes-types 1.30 + the TypeScript compiler: every object becomes a typed object literal,
//     so a misspelled or unknown field anywhere in the tree is an error (excess property check),
//     as are wrong types and missing required fields.
// An object must pass both; a kind neither knows is an error too. Usage: node k8s.mjs FILE...
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { createRequire } from "node:module";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { execFileSync } from "node:child_process";
import { finish, readYamlDocuments, requireArgs } from "./common.mjs";

const require = createRequire(import.meta.url);
const deployDir = dirname(dirname(fileURLToPath(import.meta.url)));

// "apps/v1" -> {group: "apps", version: "v1"}; "v1" -> core; "networking.k8s.io/v1" -> networking.
function splitApiVersion(apiVersion) {
  const [group, version] = apiVersion.includes("/") ? apiVersion.split("/") : ["core", apiVersion];
  return { group: group.replace(/\.k8s\.io$/, ""), version, fullGroup: apiVersion.includes("/") ? group : "" };
}

function label(doc) {
  return `${doc.kind ?? "?"}/${doc.metadata?.name ?? "?"}`;
}

function schemaCheck(file, doc, findings) {
  const { fullGroup, version } = splitApiVersion(String(doc.apiVersion));
  const modulePath = `kubernetes-models/${fullGroup ? fullGroup + "/" : ""}${version}/${doc.kind}`;
  let Model;
  try {
    Model = require(modulePath)[doc.kind];
  } catch {
    findings.push({ file, where: label(doc), message: `unknown apiVersion/kind ${doc.apiVersion} ${doc.kind}` });
    return false;
  }
  try {
    new Model(doc).validate();
  } catch (e) {
    for (const line of String(e.message).split("\n")) findings.push({ file, where: label(doc), message: `schema: ${line}` });
  }
  return true;
}

// Emits one typed constant per object and compiles the lot; maps compiler errors back to objects.
function strictCheck(objects, findings) {
  if (objects.length === 0) return;
  const tmp = mkdtempSync(join(deployDir, "node_modules", ".sketchps-k8s-"));
  const imports = new Map();
  const lines = [];
  const lineOwner = [];
  objects.forEach(({ file, doc }, i) => {
    const { group, version } = splitApiVersion(String(doc.apiVersion));
    const alias = `${group.replace(/[^A-Za-z0-9]/g, "_")}_${version}`;
    imports.set(alias, `kubernetes-types/${group}/${version}`);
    const body = JSON.stringify(doc, null, 1).split("\n");
    body[0] = `export const o${i}: ${alias}.${doc.kind} = ${body[0]}`;
    body[body.length - 1] += ";";
    for (const l of body) { lines.push(l); lineOwner.push({ file, where: label(doc) }); }
  });
  const header = [...imports].map(([alias, mod]) => `import type * as ${alias} from "${mod}";`);
  const tsFile = join(tmp, "objects.ts");
  writeFileSync(tsFile, [...header, ...lines].join("\n") + "\n");
  const config = { files: ["objects.ts"], compilerOptions: { noEmit: true, strict: true, skipLibCheck: true,
    types: [], target: "es2022", module: "esnext", moduleResolution: "bundler", pretty: false } };
  writeFileSync(join(tmp, "tsconfig.json"), JSON.stringify(config));
  const tsc = require.resolve("typescript/bin/tsc");
  try {
    execFileSync(process.execPath, [tsc, "-p", join(tmp, "tsconfig.json")],
      { encoding: "utf8", stdio: ["ignore", "pipe", "pipe"] });
  } catch (e) {
    const out = `${e.stdout ?? ""}${e.stderr ?? ""}`;
    const re = /objects\.ts\((\d+),\d+\): error TS\d+: (.*)/g;
    let m, any = false;
    while ((m = re.exec(out)) !== null) {
      any = true;
      const owner = lineOwner[Number(m[1]) - 1 - header.length] ?? { file: "?", where: "?" };
      findings.push({ ...owner, message: `strict: ${m[2]}` });
    }
    if (!any) findings.push({ file: tsFile, where: "tsc", message: out.trim() || String(e) });
  } finally {
    rmSync(tmp, { recursive: true, force: true });
  }
}

const files = requireArgs("k8s.mjs", "RENDERED.yaml...");
const findings = [];
const objects = [];
for (const file of files) {
  for (const { doc, index } of readYamlDocuments(file, findings)) {
    if (typeof doc !== "object" || !doc.apiVersion || !doc.kind) {
      findings.push({ file, where: `document ${index}`, message: "not a Kubernetes object (apiVersion and kind required)" });
      continue;
    }
    if (schemaCheck(file, doc, findings)) objects.push({ file, doc });
  }
}
strictCheck(objects, findings);
finish("k8s", findings, `${objects.length} objects in ${files.length} file(s)`);
