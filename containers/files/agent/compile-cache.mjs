// Fills Node.js's compile cache (NODE_COMPILE_CACHE) with the modules of
// the bundle directories named as arguments, when the agent image is
// built: the CLI in a sandbox then reads V8's code for them instead of
// compiling tens of megabytes of JavaScript at each start. Importing a
// module runs its top level only; an entry point that would start the CLI
// (gemini.js) is left out. See containers/README.md.
import fs from 'node:fs';
import module from 'node:module';
import path from 'node:path';
import url from 'node:url';

const res = module.enableCompileCache?.();
if (!res || res.status === module.constants.compileCacheStatus.FAILED) {
  console.error('compile-cache: no compile cache:', res?.message ?? `node ${process.version} has none (22.1 or later)`);
  process.exit(1);
}
let n = 0;
for (const dir of process.argv.slice(2)) {
  for (const f of fs.readdirSync(dir).sort()) {
    if (!f.endsWith('.js') || f === 'gemini.js') {
      continue;
    }
    try {
      await import(url.pathToFileURL(path.join(dir, f)).href);
      n++;
    } catch (e) {
      console.error(`compile-cache: ${f}: ${String(e).split('\n')[0]}`);
    }
  }
}
module.flushCompileCache();
console.error(`compile-cache: ${n} modules in ${res.directory}`);
// A module's top level may have left timers or handles behind.
process.exit(0);
