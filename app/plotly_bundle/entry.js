// The traces the dashboard draws (app/, lab/plots/: go.Scatter, go.Bar, go.Heatmap, go.Image); scatter and
// the components (sliders, updatemenus, legend, colorbar, ...) come with plotly.js's core.
'use strict';
var Plotly = require('plotly.js/lib/core');

Plotly.register([require('plotly.js/lib/bar'), require('plotly.js/lib/heatmap'), require('plotly.js/lib/image')]);

module.exports = Plotly;
