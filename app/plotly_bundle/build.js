// Builds ../static/plotly-paralab.min.js with plotly.js's own esbuild settings (its esbuild-config.js, less the
// GL plugin no trace here needs). Run from this folder: `npm install && npm run build`.
const esbuild = require('esbuild');
const { environmentPlugin } = require('esbuild-plugin-environment');
const InlineCSSPlugin = require('esbuild-plugin-inline-css');
const { version } = require('plotly.js/package.json');

esbuild.build({
    entryPoints: ['./entry.js'],
    outfile: '../static/plotly-paralab.min.js',
    banner: { js: `/* plotly.js (paralab: scatter, bar, heatmap, image - minified) v${version} | MIT licence: plotly-paralab.LICENSE.txt */` },
    format: 'iife',
    globalName: 'Plotly',
    bundle: true,
    minify: true,
    legalComments: 'eof',
    plugins: [InlineCSSPlugin(), environmentPlugin({ NODE_DEBUG: false })],
    alias: { regl: '@plotly/regl' },
    define: { global: 'window', 'define.amd': 'false' },
    target: 'es2016',
    logLevel: 'info'
}).catch(() => process.exit(1));
