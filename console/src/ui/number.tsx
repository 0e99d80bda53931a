/** `<Num value digits />`: a figure shown rounded, with its exact value in `data-value` (the
 * shortest text that reads back as the same double) and a tooltip, so nothing is lost by rounding. */
export function fixed(value: number, digits = 4): string {
  return Number.isFinite(value) ? value.toFixed(digits) : String(value);
}

export function Num(props: { value: number | undefined | null; digits?: number; name?: string }) {
  if (props.value === undefined || props.value === null) return <span class="unset" data-name={props.name}>—</span>;
  return (
    <span class="fig" data-name={props.name} data-value={String(props.value)} title={String(props.value)}>
      {fixed(props.value, props.digits ?? 4)}
    </span>
  );
}
