// ESLint's and typescript-eslint's recommended rules over the TypeScript sources of the
// package it runs in (lint.sh runs it with --config from that package's directory).
import eslint from "@eslint/js";
import { defineConfig } from "eslint/config";
import tseslint from "typescript-eslint";

export default defineConfig(
  { files: ["src/**/*.ts"] },
  eslint.configs.recommended,
  tseslint.configs.recommended,
  {
    rules: {
      // `const { length: _length, ...rest } = header` is how a member is left out of a copy.
      "@typescript-eslint/no-unused-vars": ["error", { ignoreRestSiblings: true }],
    },
  },
);
