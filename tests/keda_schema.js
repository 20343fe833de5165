// Validates KEDA objects against the schemas of @kubernetes-models/keda.
// Reads a JSON array of objects on stdin; prints one line per invalid object
// (its kind, its name, what is wrong) and exits 1 if any, 0 otherwise.
// Objects of other kinds are refused: the caller picks the KEDA ones.
const kinds = {
  ScaledObject: require("@kubernetes-models/keda/keda.sh/v1alpha1/ScaledObject").ScaledObject,
  TriggerAuthentication: require("@kubernetes-models/keda/keda.sh/v1alpha1/TriggerAuthentication")
    .TriggerAuthentication,
};

let input = "";
process.stdin.on("data", (chunk) => (input += chunk));
process.stdin.on("end", () => {
  let failed = false;
  for (const object of JSON.parse(input)) {
    const Model = kinds[object.kind];
    const name = `${object.kind} ${object.metadata && object.metadata.name}`;
    if (!Model || object.apiVersion !== "keda.sh/v1alpha1") {
      console.log(`${name}: not a KEDA object this script knows (${object.apiVersion})`);
      failed = true;
      continue;
    }
    try {
      new Model(object).validate();
      console.log(`${name}: valid`);
    } catch (error) {
      console.log(`${name}: ${error.message}`);
      failed = true;
    }
  }
  process.exit(failed ? 1 : 0);
});
