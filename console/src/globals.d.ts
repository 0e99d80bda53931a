/** The URL of pdf.js's worker, a hashed asset of the build (scripts/build.mjs). */
declare const __PDF_WORKER_URL__: string;
