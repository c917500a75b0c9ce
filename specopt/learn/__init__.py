"""scikit-learn style estimators built on specopt's routes (needs scikit-learn)."""
