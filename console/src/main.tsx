/** The console's entry: the sign-in page until a key is kept, then the routed pages. */
import { render } from "preact";
import "./styles.css";
import { useRoute } from "./router";
import { AdminPage } from "./pages/admin";
import { CollectionPage } from "./pages/collection";
import { CollectionsPage } from "./pages/collections";
import { DocumentPage } from "./pages/document";
import { EvaluationPage } from "./pages/evaluation";
import { SearchPage } from "./pages/search";
import { SignInPage } from "./pages/signin";
import { SourcesPage } from "./pages/sources";
import { WebhooksPage } from "./pages/webhooks";
import { Layout } from "./ui/layout";
import { useSession } from "./ui/session";

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
      <Page key={route.path} segments={route.segments} />
    </Layout>
  );
}

render(<App />, document.getElementById("app")!);
