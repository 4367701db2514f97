"""Reading what a user brings: PDFs, images, manifests, BEIR / ViDoRe folders, label files, the cache."""
