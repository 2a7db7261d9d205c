"""The node groups themselves: as their provider reports them, which are opted in, their
name patterns, impaired zones, and the events told about them."""
