"""``delivery-pipeline people``: who receives documents."""

from __future__ import annotations

import argparse

from delivery_pipeline.cli.registration import Commands, add_command, add_group, database_url
from delivery_pipeline.cli.table import print_rows
from delivery_pipeline.settings import Settings
from delivery_pipeline.store.db import connect
from delivery_pipeline.store.intake import add_person, new_person
from delivery_pipeline.store.queries import QUERIES


def cmd_people_add(args: argparse.Namespace, settings: Settings) -> int:
    with connect(database_url(settings)) as conn:
        checked = new_person(
            phone=args.phone,
            user_id=args.user_id,
            name=args.name,
            locale=args.locale,
            time_zone=args.time_zone,
            brief_opt_in=args.brief_opt_in,
            brief_local_time=args.brief_time,
            quiet_hours=args.quiet_hours,
            whatsapp=settings.whatsapp,
            phone_number_id=args.number,
        )
        person = add_person(conn, checked)
        if args.outside_window is not None:
            changed = QUERIES.set_outside_window.one(
                conn, {"person_id": person.id, "outside_window": args.outside_window}
            )
            assert changed is not None  # just added
            person = changed
    number = person.phone_number_id or settings.whatsapp.phone_number_id
    print(
        f"person {person.id}: {person.name or '(no name)'} {person.phone or person.user_id}, "
        f"from business number {number}"
    )
    return 0


def cmd_people_list(args: argparse.Namespace, settings: Settings) -> int:
    with connect(database_url(settings)) as conn:
        people = QUERIES.list_people.all(conn, {})
    print_rows(
        [person._asdict() for person in people],
        [
            "id",
            "phone",
            "user_id",
            "name",
            "locale",
            "time_zone",
            "brief_opt_in",
            "phone_number_id",
            "last_inbound_at",
        ],
    )
    return 0


def register(commands: Commands) -> None:
    people = add_group(commands, "people", "people who receive documents", "People.")
    p = add_command(people, "add", cmd_people_add, "add a person")
    p.add_argument("--phone", help="E.164 number, e.g. +5511987654321 (this or --user-id)")
    p.add_argument(
        "--user-id",
        help="business-scoped user id (BSUID), e.g. US.13491208655302741918, for a person "
        "who uses a WhatsApp username (sent to with `recipient`)",
    )
    p.add_argument("--name", default="", help="name used in the knock template")
    p.add_argument("--locale", default="en", help="en, es or pt")
    p.add_argument("--time-zone", default="UTC", help="IANA time zone, e.g. America/Sao_Paulo")
    p.add_argument("--brief-opt-in", action="store_true", help="send a daily brief")
    p.add_argument("--brief-time", default="07:00", help="local time of the daily brief (HH:MM)")
    p.add_argument(
        "--quiet-hours",
        help="their own quiet hours, local HH:MM-HH:MM (default: DELIVERY_QUIET_HOURS; "
        "00:00-00:00 for none)",
    )
    p.add_argument(
        "--number",
        help="the business phone number id they are sent from (WHATSAPP_PHONE_NUMBER_ID or "
        "one of WHATSAPP_NUMBERS; default: by their calling code, else the default number)",
    )
    p.add_argument(
        "--outside-window",
        choices=("knock", "file"),
        help="their documents while their window is closed: knock (ask them first) or file "
        "(one PDF on a document template, DELIVERY_DOCUMENT_TEMPLATES); default: by kind, "
        "DELIVERY_FILE_OUTSIDE_WINDOW",
    )
    add_command(people, "list", cmd_people_list, "list people")
