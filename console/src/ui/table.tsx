/**
 * `<Table columns rows rowKey />`: a plain, accessible table. Each column renders a cell from a row;
 * what it returns is rendered as Preact nodes, so data stays text.
 */
import type { ComponentChildren } from "preact";

export interface Column<Row> {
  header: string;
  cell: (row: Row) => ComponentChildren;
  /** Right-aligned numbers. */
  numeric?: boolean;
}

export function Table<Row>(props: {
  caption: string;
  columns: Column<Row>[];
  rows: Row[];
  rowKey: (row: Row) => string;
  empty?: ComponentChildren;
  rowClass?: (row: Row) => string;
}) {
  return (
    <table>
      <caption class="visually-hidden">{props.caption}</caption>
      <thead>
        <tr>
          {props.columns.map((column) => (
            <th scope="col" class={column.numeric ? "num" : undefined} key={column.header}>
              {column.header}
            </th>
          ))}
        </tr>
      </thead>
      <tbody>
        {props.rows.length === 0 ? (
          <tr>
            <td colSpan={props.columns.length} class="empty">
              {props.empty ?? "Nothing here yet."}
            </td>
          </tr>
        ) : (
          props.rows.map((row) => (
            <tr key={props.rowKey(row)} class={props.rowClass?.(row)}>
              {props.columns.map((column) => (
                <td class={column.numeric ? "num" : undefined} key={column.header}>
                  {column.cell(row)}
                </td>
              ))}
            </tr>
          ))
        )}
      </tbody>
    </table>
  );
}
