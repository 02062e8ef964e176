"""API modules the suite is tested against (``recon-spec check-api``): one correct module
written from the seed (``properties.zoo.api.correct``), and wrong ones, each that module
with one realistic mistake (``properties.zoo.api.wrong``)."""
