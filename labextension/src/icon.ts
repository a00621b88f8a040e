import { LabIcon } from '@jupyterlab/ui-components';

// A flame with a magnifier's ring: "checks PyTorch cells". Static markup, no data.
const svg = `<svg xmlns="http://www.w3.org/2000/svg" width="16" height="16" viewBox="0 0 24 24">
  <g class="jp-icon3" fill="#616161">
    <path d="M12.9 2.2c.3 2.4-.6 3.9-2 5.3-1.6 1.6-3.4 3.3-3.4 6.3a6 6 0 0 0 9.3 5l-1.5-1.5a3.9 3.9 0 0 1-5.7-3.5c0-2 1.2-3.2 2.7-4.7 1.1-1.1 2.3-2.4 2.8-4.3 1.6 1.3 3.2 3.6 3.5 6.4l2.1.1c-.3-4.2-3.4-7.6-7.8-9.1z"/>
    <circle cx="15.6" cy="6.3" r="1.3"/>
    <path d="M12.5 11.2a3.3 3.3 0 1 0 1.9 6l3.2 3.2 1.3-1.3-3.2-3.2a3.3 3.3 0 0 0-3.2-4.7zm0 1.7a1.6 1.6 0 1 1 0 3.2 1.6 1.6 0 0 1 0-3.2z"/>
  </g>
</svg>`;

export const torchmagicIcon = new LabIcon({ name: 'torchmagic:sidebar', svgstr: svg });
