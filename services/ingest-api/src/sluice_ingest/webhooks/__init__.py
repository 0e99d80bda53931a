"""Webhooks: a collection's events log delivered to subscribed URLs, signed (Standard Webhooks).

events.py (event types, payloads: pure), guard.py (which URLs and addresses may be called),
signing.py (secrets and signatures), store.py (SQL), service.py (use cases), api.py (gRPC
servicer), sender.py (one signed POST to a checked, pinned address), dispatcher.py (the
background delivery loop), main.py (`sluice-webhooks`, the process that runs it).
"""
