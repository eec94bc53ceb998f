// Bundles src/ into OUTDIR/{index.html,app.js,app.css} with esbuild: no CDN and no network at
// run time, everything the page needs is in those three files.
import { build } from 'esbuild';
import { copyFileSync, mkdirSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const here = dirname(fileURLToPath(import.meta.url));
const out = process.argv[2] || join(here, 'dist');
mkdirSync(out, { recursive: true });
const common = { bundle: true, minify: true, legalComments: 'none', logLevel: 'warning' };
await build({ ...common, entryPoints: [join(here, 'src', 'main.js')], outfile: join(out, 'app.js'),
              format: 'iife', target: 'es2020' });
await build({ ...common, entryPoints: [join(here, 'src', 'app.css')], outfile: join(out, 'app.css') });
copyFileSync(join(here, 'src', 'index.html'), join(out, 'index.html'));
