"""`sluice tenants …` and `sluice keys …`: administration with an admin key."""

from __future__ import annotations

import argparse

from rich.markup import escape
from rich.table import Table
from sluice_client import Client
from sluice_client.client import ROLES

from . import render
from .errors import EXIT_OK

ROLE_NAMES = {v: k for k, v in ROLES.items()}


def _limit(value: int) -> str:
    return str(value) if value else "unlimited"


def tenants_create(client: Client, args: argparse.Namespace) -> int:
    created = client.admin.create_tenant(
        args.name, max_documents=args.max_documents, max_stored_bytes=args.max_bytes, max_collections=args.max_collections
    ).raw
    if args.json:
        render.print_json(render.to_dict(created))
    else:
        render.out.print(
            f"Created tenant [bold]{escape(created.name)}[/]. Give it a key: "
            f"sluice keys create --tenant {created.name} --role client"
        )
    return EXIT_OK


def tenants_list(client: Client, args: argparse.Namespace) -> int:
    tenants = [t.raw for t in client.admin.list_tenants()]
    if args.json:
        render.print_json({"tenants": [render.to_dict(t) for t in tenants]})
        return EXIT_OK
    table = Table(box=None, header_style="bold")
    for column in ("TENANT", "COLLECTIONS", "DOCUMENTS", "STORED", "QUOTA (docs / bytes / collections)"):
        table.add_column(column)
    for t in tenants:
        q = t.quota
        table.add_row(
            escape(t.name),
            str(t.usage.collections),
            str(t.usage.documents),
            render.human_bytes(t.usage.stored_bytes),
            f"{_limit(q.max_documents)} / {_limit(q.max_stored_bytes)} / {_limit(q.max_collections)}",
        )
    render.out.print(table)
    return EXIT_OK


def keys_create(client: Client, args: argparse.Namespace) -> int:
    response = client.admin.create_key(args.key_tenant, args.role, name=args.name, collections=args.collections or ())
    if args.json:
        render.print_json({"api_key": render.to_dict(response.key.raw), "secret": response.secret})
    else:
        render.out.print(
            f"Created a {args.role} key of tenant [bold]{escape(args.key_tenant)}[/] "
            f"({response.key.prefix}…). It is shown this once; keep it secret:"
        )
        # The key on its own line, unstyled, for copying.
        render.out.print(response.secret, markup=False, highlight=False, soft_wrap=True)
    return EXIT_OK


def keys_list(client: Client, args: argparse.Namespace) -> int:
    keys = [k.raw for k in client.admin.list_keys(args.key_tenant)]
    if args.json:
        render.print_json({"api_keys": [render.to_dict(k) for k in keys]})
        return EXIT_OK
    table = Table(box=None, header_style="bold")
    for column in ("PREFIX", "TENANT", "ROLE", "COLLECTIONS", "NAME", "CREATED", "STATE"):
        table.add_column(column)
    for k in keys:
        state = f"revoked {render.timestamp(k.revoke_time)}" if k.HasField("revoke_time") else "active"
        table.add_row(
            k.prefix,
            escape(k.tenant),
            ROLE_NAMES.get(k.role, "?"),
            ", ".join(k.collections) or "all",
            escape(k.name),
            render.timestamp(k.create_time),
            state,
        )
    render.out.print(table)
    return EXIT_OK


def keys_revoke(client: Client, args: argparse.Namespace) -> int:
    key = client.admin.revoke_key(args.key).raw
    if args.json:
        render.print_json(render.to_dict(key))
    else:
        render.out.print(f"Revoked {key.prefix}… ({ROLE_NAMES.get(key.role, '?')} key of tenant {escape(key.tenant)}).")
    return EXIT_OK
