"""The shop's HTTP API: an order and its confirmation e-mail are written in ONE transaction.

    POST /orders {"email": "...", "total_cents": 1250}

The order row (SQLAlchemy ORM) and the job (`send_order_confirmation.using(session)`) commit
together: if anything fails before the commit, there is neither an order nor an e-mail to send.
Run it from `examples/` (DATABASE_URL set) with `uvicorn shop.web:create_app --factory`
(`create_app` builds the app; there is no module-level `app`), beside
`codity worker --app shop.tasks:app`.
"""

from __future__ import annotations

import os
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from fastapi import FastAPI, HTTPException
from pydantic import BaseModel, Field
from sqlalchemy import ForeignKey, String, Text
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker, create_async_engine
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column

from shop.tasks import send_order_confirmation


class Base(DeclarativeBase):
    pass


class Order(Base):
    __tablename__ = "shop_orders"
    id: Mapped[int] = mapped_column(primary_key=True)
    email: Mapped[str] = mapped_column(String(320))
    total_cents: Mapped[int]


class SentEmail(Base):
    """Written by the task (the example's stand-in for an e-mail provider)."""

    __tablename__ = "shop_emails"
    order_id: Mapped[int] = mapped_column(ForeignKey("shop_orders.id"), primary_key=True)
    recipient: Mapped[str] = mapped_column(Text)


class OrderIn(BaseModel):
    email: str = Field(min_length=3, max_length=320)
    total_cents: int = Field(gt=0)
    #: For the demo and the test: fail after enqueueing, before the commit.
    fail_before_commit: bool = False


class OrderOut(BaseModel):
    id: int
    confirmation_job_id: int


def create_app(database_url: str | None = None) -> FastAPI:
    url = (database_url or os.environ["DATABASE_URL"]).replace(
        "postgresql://", "postgresql+asyncpg://", 1
    )
    engine = create_async_engine(url)
    sessions = async_sessionmaker(engine, expire_on_commit=False)

    @asynccontextmanager
    async def lifespan(_app: FastAPI) -> AsyncIterator[None]:
        async with engine.begin() as conn:
            await conn.run_sync(Base.metadata.create_all)
        yield
        await engine.dispose()

    api = FastAPI(title="shop", lifespan=lifespan)

    @api.post("/orders", status_code=201)
    async def place_order(body: OrderIn) -> OrderOut:
        session: AsyncSession
        async with sessions() as session, session.begin():
            order = Order(email=body.email, total_cents=body.total_cents)
            session.add(order)
            await session.flush()  # the order's id, inside the transaction
            job = await send_order_confirmation.using(session).enqueue(
                order_id=order.id, email=body.email
            )
            if body.fail_before_commit:
                raise HTTPException(500, "failed before commit (on purpose)")
        return OrderOut(id=order.id, confirmation_job_id=job.id)

    return api
