// The ES module entry of gitmem-kaboo: gitmem-thread-store.cjs is the adapter, so that
// `import` and `require` in one process share its gitmem serve processes.
export { GITMEM_VERSION, GitMemError, GitMemThreadStore } from "./gitmem-thread-store.cjs";
