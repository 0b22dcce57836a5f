"""Domain models at every boundary (pydantic v2). Import from the concept's module."""
