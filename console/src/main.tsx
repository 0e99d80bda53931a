/** The console's entry: the sign-in page until a key is kept, then the routed pages. */
import { render } from "preact";
import { lazy, Suspense } from "preact/compat";
import "./styles.css";
// The lazily loaded pages' styles: esbuild puts a lazy chunk's CSS in a file of its own that
// nothing would load, so they come with the first stylesheet (about 1 KiB gzipped).
import "./pages/pages.css";
import { useRoute } from "./router";
import { CollectionPage } from "./pages/collection";
import { CollectionsPage } from "./pages/collections";
import { DocumentPage } from "./pages/document";
import { SignInPage } from "./pages/signin";
import { Layout } from "./ui/layout";
import { useSession } from "./ui/session";

// The other pages are chunks of their own, loaded when first opened: the first load stays the
// collections' and documents' (docs/console.md#the-size-budget).
const SearchPage = lazy(() => import("./pages/search").then((m) => ({ default: m.SearchPage })));
const EvaluationPage = lazy(() => import("./pages/evaluation").then((m) => ({ default: m.EvaluationPage })));
const SourcesPage = lazy(() => import("./pages/sources").then((m) => ({ default: m.SourcesPage })));
const WebhooksPage = lazy(() => import("./pages/webhooks").then((m) => ({ default: m.WebhooksPage })));
const AdminPage = lazy(() => import("./pages/admin").then((m) => ({ default: m.AdminPage })));

function Page(props: { segments: string[] }) {
  const [section, id] = props.segments;
  switch (section) {
    case undefined:
    case "collections":
      return id ? <CollectionPage name={id} /> : <CollectionsPage />;
    case "documents":
      return id ? <DocumentPage id={id} /> : <CollectionsPage />;
    case "search":
      return <SearchPage />;
    case "evaluation":
      return <EvaluationPage />;
    case "sources":
      return <SourcesPage />;
    case "webhooks":
      return <WebhooksPage />;
    case "admin":
      return <AdminPage />;
    default:
      return (
        <section>
          <h1>Not found</h1>
          <p>The console has no such page.</p>
        </section>
      );
  }
}

function App() {
  const { session } = useSession();
  const route = useRoute();
  if (!session) return <SignInPage />;
  return (
    <Layout path={route.path}>
      <Suspense fallback={<p aria-live="polite">Loading…</p>}>
        <Page key={route.path} segments={route.segments} />
      </Suspense>
    </Layout>
  );
}

render(<App />, document.getElementById("app")!);
