// Validates compose files against the compose-spec JSON schema (the copy the npm package dclint
// ships, pinned by deploy/package-lock.json), reporting every error, not just the first.
// Interpolation (${VAR:-default}) is left as is: the schema accepts strings wherever it may occur.
// Usage: node compose.mjs FILE...
import { existsSync, readFileSync } from "node:fs";
import { createRequire } from "node:module";
import { dirname, join } from "node:path";
import Ajv from "ajv";
import addFormats from "ajv-formats";
import { finish, readYamlDocuments, requireArgs } from "./common.mjs";

const require = createRequire(import.meta.url);
// The schema is not in dclint's package "exports": walk up from the package's main entry.
let dclintRoot = dirname(require.resolve("dclint"));
while (!existsSync(join(dclintRoot, "schemas", "compose.schema.json")) && dirname(dclintRoot) !== dclintRoot) {
  dclintRoot = dirname(dclintRoot);
}
const schema = JSON.parse(readFileSync(join(dclintRoot, "schemas", "compose.schema.json"), "utf8"));
delete schema.$schema; // draft-07 URL without '#', which ajv does not know; ajv's default is draft-07

const ajv = new Ajv({ allErrors: true, strict: false });
addFormats(ajv);
const validate = ajv.compile(schema);

const files = requireArgs("compose.mjs", "COMPOSE.yml...");
const findings = [];
for (const file of files) {
  const docs = readYamlDocuments(file, findings);
  if (docs.length !== 1) {
    findings.push({ file, where: "file", message: `expected one YAML document, found ${docs.length}` });
    continue;
  }
  if (!validate(docs[0].doc)) {
    for (const e of validate.errors) {
      const extra = e.params?.additionalProperty ? ` ('${e.params.additionalProperty}')` : "";
      findings.push({ file, where: e.instancePath || "/", message: `${e.message}${extra}` });
    }
  }
}
finish("compose", findings, `${files.length} file(s)`);
