// Validates KEDA's and the Prometheus Operator's objects against the schemas
// of @kubernetes-models/keda and @kubernetes-models/prometheus-operator.
// Reads a JSON array of objects on stdin; prints one line per invalid object
// (its kind, its name, what is wrong) and exits 1 if any, 0 otherwise.
// Objects of other kinds are refused: the caller picks these.
// The Prometheus Operator's models are ES modules that export no subpath to
// require(): they are imported by file, from NODE_PATH.
const path = require("path");
const { pathToFileURL } = require("url");
const keda = "@kubernetes-models/keda/keda.sh/v1alpha1/";
const operator = "@kubernetes-models/prometheus-operator/monitoring.coreos.com/v1/";
const byFile = async (name) =>
  import(pathToFileURL(path.join(process.env.NODE_PATH, operator + name + ".js")).href);

async function models() {
  return {
    "keda.sh/v1alpha1": {
      ScaledObject: require(keda + "ScaledObject").ScaledObject,
      TriggerAuthentication: require(keda + "TriggerAuthentication").TriggerAuthentication,
    },
    "monitoring.coreos.com/v1": {
      PodMonitor: (await byFile("PodMonitor")).PodMonitor,
      PrometheusRule: (await byFile("PrometheusRule")).PrometheusRule,
    },
  };
}

let input = "";
process.stdin.on("data", (chunk) => (input += chunk));
process.stdin.on("end", async () => {
  const kinds = await models();
  let failed = false;
  for (const object of JSON.parse(input)) {
    const Model = (kinds[object.apiVersion] || {})[object.kind];
    const name = `${object.kind} ${object.metadata && object.metadata.name}`;
    if (!Model) {
      console.log(`${name}: not an object this script knows (${object.apiVersion})`);
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
