/**
 * `<BarChart />`: grouped bars drawn as inline SVG with Preact elements (no chart library). Sizes
 * and colours are SVG attributes and classes, never a style attribute (the console's CSP has no
 * 'unsafe-inline' for styles: docs/console.md). The figures are also in a table beside it; the
 * chart is an image with a text alternative.
 */
export interface BarGroup {
  label: string;
  /** One value per series, in the series' order; null for none. */
  values: (number | null)[];
}

export function BarChart(props: { title: string; description: string; series: string[]; groups: BarGroup[]; max?: number; digits?: number }) {
  const max = props.max ?? Math.max(1e-9, ...props.groups.flatMap((g) => g.values.filter((v): v is number => v !== null)));
  const digits = props.digits ?? 3;
  const width = 680;
  const height = 250;
  const left = 40;
  const right = 10;
  const top = 16;
  const bottom = 40;
  const plotW = width - left - right;
  const plotH = height - top - bottom;
  const groupW = props.groups.length ? plotW / props.groups.length : plotW;
  const barW = Math.max(6, Math.min(60, (groupW * 0.8) / Math.max(1, props.series.length)));
  const y = (v: number) => top + plotH - (Math.max(0, v) / max) * plotH;
  const ticks = [0, 0.25, 0.5, 0.75, 1].map((t) => t * max);
  const titleId = `chart-${props.title.replace(/[^a-zA-Z0-9]+/g, "-")}`;
  return (
    <figure class="chart">
      <div class="legend" aria-hidden="true">
        {props.series.map((s, i) => (
          <span key={s}>
            <span class={`swatch s${i % 4}`} />
            {s}
          </span>
        ))}
      </div>
      <svg viewBox={`0 0 ${width} ${height}`} width="100%" role="img" aria-labelledby={`${titleId}-t ${titleId}-d`}>
        <title id={`${titleId}-t`}>{props.title}</title>
        <desc id={`${titleId}-d`}>{props.description}</desc>
        {ticks.map((t) => (
          <g key={t}>
            <line class="grid" x1={left} x2={width - right} y1={y(t)} y2={y(t)} />
            <text x={left - 6} y={y(t) + 4} text-anchor="end">
              {t.toFixed(2)}
            </text>
          </g>
        ))}
        <line class="axis" x1={left} x2={width - right} y1={top + plotH} y2={top + plotH} />
        {props.groups.map((group, gi) => {
          const x0 = left + gi * groupW + (groupW - barW * props.series.length) / 2;
          return (
            <g key={group.label}>
              {group.values.map((v, si) =>
                v === null ? null : (
                  <g key={si}>
                    <rect class={`s${si % 4}`} x={x0 + si * barW + 1} y={y(v)} width={barW - 2} height={top + plotH - y(v)} />
                    <text x={x0 + si * barW + barW / 2} y={y(v) - 3} text-anchor="middle">
                      {v.toFixed(digits)}
                    </text>
                  </g>
                ),
              )}
              <text x={left + gi * groupW + groupW / 2} y={height - bottom + 18} text-anchor="middle">
                {group.label}
              </text>
            </g>
          );
        })}
      </svg>
      <figcaption class="visually-hidden">{props.title}</figcaption>
    </figure>
  );
}
