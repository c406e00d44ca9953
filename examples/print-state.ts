// A complete kpng backend: prints each service and its endpoints whenever the node's state
// changes.   node examples/print-state.ts --api unix:///run/kpng/proxy.sock --node-name node-1

import { run, UsageError } from "../src/client/run.ts";
import { clusterIPsOf, endpointString } from "../src/model/local.ts";

const printState = run((services, state) => {
  console.log(`# node ${state.node}, revision ${state.revision}, ${services.length} services`);
  for (const svc of services) {
    console.log(`${svc.namespace}/${svc.name} ${svc.type} ${clusterIPsOf(svc).join(",")}`);
    for (const port of svc.ports) {
      const eps = port.internalEndpoints.map((ep) => endpointString(ep) + (ep.local ? " (local)" : ""));
      console.log(`  ${port.protocol}/${port.port} -> ${eps.join(" ") || "(no endpoints)"}`);
    }
  }
});
await printState.catch((err: Error) => {
  console.error(err instanceof UsageError ? `print-state: ${err.message}` : err);
  process.exitCode = 2;
});
