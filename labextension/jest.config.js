// Rendering and escaping tests run in jsdom. The views under test import only @lumino
// packages (which ship CommonJS), so ts-jest suffices; no JupyterLab app is started.
module.exports = {
  testEnvironment: 'jsdom',
  setupFiles: ['<rootDir>/jest.setup.js'],
  testRegex: 'src/__tests__/.*\\.spec\\.ts$',
  transform: {
    '^.+\\.ts$': ['ts-jest', { tsconfig: 'tsconfig.test.json' }]
  },
  collectCoverageFrom: ['src/**/*.ts', '!src/**/*.d.ts', '!src/index.ts', '!src/icon.ts', '!src/navigate.ts']
};
