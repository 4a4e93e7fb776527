"""rgym-task-vision: MLGym's vision tasks (Fashion-MNIST, CIFAR-10, MS-COCO captioning)."""
