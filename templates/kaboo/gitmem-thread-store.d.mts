// Types of gitmem-thread-store.mjs, which re-exports gitmem-thread-store.cjs.
export * from "./gitmem-thread-store.cjs";
