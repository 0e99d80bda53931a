/** A page that is routed but not built yet. */
export function NotYet(props: { title: string; what: string }) {
  return (
    <section>
      <h1>{props.title}</h1>
      <p class="not-yet">Not yet: {props.what}</p>
    </section>
  );
}
