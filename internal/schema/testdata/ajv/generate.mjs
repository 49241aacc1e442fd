// Generates golden.json: ajv 8.17.1's verdict and error text for every
// (schema, instance) in cases.json, which TestAjvGolden compares with our
// validator and FuzzAjvGolden seeds from. Run on demand, not in CI:
//
//	cd internal/schema/testdata/ajv && npm ci && node generate.mjs
//
// ajv is configured as the gateway's validator documents itself
// (internal/schema/validate.go): allErrors, errors joined by errorsText with
// dataVar "data", formats not enforced, no strict mode; draft-07 with the
// "next" and "unevaluated" vocabularies unless "$schema" names 2019-09 or
// 2020-12.
import { readFileSync, writeFileSync } from "node:fs";
import Ajv from "ajv";
import Ajv2019 from "ajv/dist/2019.js";
import Ajv2020 from "ajv/dist/2020.js";
import nextVocabulary from "ajv/dist/vocabularies/next.js";
import unevaluatedVocabulary from "ajv/dist/vocabularies/unevaluated/index.js";

const opts = { allErrors: true, strict: false, validateFormats: false };

function ajvFor(schema) {
  const id = typeof schema === "object" && schema !== null ? String(schema.$schema ?? "") : "";
  if (id.includes("2020-12")) return new Ajv2020(opts);
  if (id.includes("2019-09")) return new Ajv2019(opts);
  // ajv 8.17.1 reads the "next" and "unevaluated" options in contains and
  // in evaluated-property tracking, but its draft-07 class adds neither
  // vocabulary (only Ajv2019 does), so add them here.
  const ajv = new Ajv({ ...opts, next: true, unevaluated: true });
  ajv.addVocabulary(nextVocabulary.default ?? nextVocabulary);
  ajv.addVocabulary(unevaluatedVocabulary.default ?? unevaluatedVocabulary);
  return ajv;
}

const groups = JSON.parse(readFileSync(new URL("cases.json", import.meta.url), "utf8"));
const out = [];
let skipped = 0;
for (const g of groups) {
  let validate;
  try {
    validate = ajvFor(g.schema).compile(g.schema);
  } catch (e) {
    console.error(`skipped ${g.name}: ajv does not compile its schema: ${e.message}`);
    skipped++;
    continue;
  }
  g.instances.forEach((instance, i) => {
    const valid = validate(instance);
    out.push({
      name: `${g.name}/${i}`,
      schema: g.schema,
      instance,
      valid,
      errors: valid ? "" : new Ajv().errorsText(validate.errors, { separator: ", ", dataVar: "data" }),
    });
  });
}
writeFileSync(new URL("golden.json", import.meta.url), JSON.stringify(out, null, 1) + "\n");
console.log(`wrote ${out.length} golden cases (${skipped} schema groups skipped)`);
