// `where` conditions read from text, refused before any call when they cannot mean what they say
// (no server needed).
import assert from "node:assert/strict";
import { test } from "node:test";

import { condition, InvalidArgument, where } from "@sluice/client";

test("a doubled operator is refused naming the condition, not read as a string value", () => {
  // "year>>2024" used to compare with the string ">2024": 0 hits and no error.
  for (const text of ["year>>2024", "year=>2024", "year<<2024", "lang==en", "lang!==en", "year> =2024"]) {
    assert.throws(() => condition(text), (err: unknown) => {
      assert.ok(err instanceof InvalidArgument, String(err));
      assert.equal(err.reason, "INVALID_FILTER");
      assert.match(err.message, /starts with an operator/);
      assert.ok(err.message.includes(JSON.stringify(text)), err.message);
      return true;
    });
    assert.throws(() => where([text]), InvalidArgument);
  }
});

test("a quoted value may start with an operator, and an unreadable condition names itself", () => {
  const quoted = condition("note = '>2024'");
  assert.equal(quoted.node.case, "condition");
  assert.equal(quoted.node.value?.value?.kind.value, ">2024");
  assert.throws(() => condition("year between 1 and 2"), /expected KEY OP VALUE/);
});
