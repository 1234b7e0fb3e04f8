// Shared helpers for the deploy/ validators: read multi-document YAML, report findings.
// A finding is {file, where, message}; every validator prints them as "file: where: message" and
// exits 1 if there is any, 0 otherwise. Exit 2 means the validator itself was misused.
import { readFileSync } from "node:fs";
import { parseAllDocuments } from "yaml";

// Returns [{doc, index}] for every non-empty document of a YAML file; YAML syntax errors become
// findings instead of exceptions, so one bad file does not hide the others' results.
export function readYamlDocuments(file, findings) {
  const docs = [];
  let index = 0;
  for (const d of parseAllDocuments(readFileSync(file, "utf8"), { merge: true })) {
    index += 1;
    if (d.errors.length > 0) {
      for (const e of d.errors) findings.push({ file, where: `document ${index}`, message: e.message });
      continue;
    }
    const doc = d.toJS({ maxAliasCount: 1000 });
    if (doc !== null && doc !== undefined) docs.push({ doc, index });
  }
  return docs;
}

export function finish(tool, findings, checked) {
  for (const f of findings) console.log(`${f.file}: ${f.where}: ${f.message}`);
  if (findings.length > 0) {
    console.log(`${tool}: ${findings.length} problem(s) in ${checked}`);
    process.exit(1);
  }
  console.log(`${tool}: ${checked}: ok`);
}

export function requireArgs(tool, usage) {
  const args = process.argv.slice(2);
  if (args.length === 0) {
    console.error(`usage: ${tool} ${usage}`);
    process.exit(2);
  }
  return args;
}
